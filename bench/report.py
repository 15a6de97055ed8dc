"""The report of a run: the results tables (rich) and the JSON file, their number
formatting, and the facts about the run they carry besides the figures (git revision, a
fingerprint of the library's sources, the machine's load average).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.harness import Bench

ROOT = Path(__file__).resolve().parent.parent


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:,.2f} ms"
    return f"{value:,.0f} {unit}"


FLOOR_SHORT = {
    "floor_drain": "(a)",
    "floor_single": "(b)",
    "floor_batch": "(c)",
    "interleaved_single": "(b), interleaved",
    "interleaved_statements": "(INSERTs in one transaction, interleaved)",
    "interleaved_batch": "(c), interleaved",
    "drain_async_1": "(1 process, async)",
    "floor_latency_p50": "(d) p50",
    "floor_latency_p95": "(d) p95",
    "floor_latency_p99": "(d) p99",
    "scale_pick_small": "(20,000 rows)",
    "scale_next_due_small": "(20,000 rows)",
}
#: How a floor measured beside its figure is shown (``scenarios.beside_plain``).
PLAIN_SHORT = "(plain drain, same rounds)"


#: The rows after which the table draws a line.
SECTION_ENDS = ("floor_batch", "drain_async_2", "latency_p99", "same_process_p99", "scale_next_due")


def _floor_short(key: str) -> str:
    return PLAIN_SHORT if key.endswith("_plain") else FLOOR_SHORT.get(key, "")


def render(console: Console, bench: Bench, meta: dict[str, Any]) -> None:
    table = Table(
        title=(
            f"sqla-scheduler benchmark ({'quick' if meta['quick'] else 'full'} run, "
            f"{meta['server']} {meta['server_version']}, {meta['durability']}, "
            f"{meta['cpus']} CPUs)"
        ),
        title_justify="left",
    )
    table.add_column("Scenario")
    table.add_column("Figure", justify="right")
    table.add_column("Raw floor (same run)", justify="right")
    table.add_column("Ratio", justify="right")
    table.add_column("Target")
    table.add_column("Met", justify="center")
    table.add_column("Notes", overflow="fold")
    for key, fig in bench.figures.items():  # in the order the suite ran them
        floor = (
            f"{_fmt(fig.floor, fig.unit)} {_floor_short(fig.floor_key or '')}".strip()
            if fig.floor_key
            else ""
        )
        ratio = ""
        if fig.ratio is not None:
            ratio = f"{fig.ratio:.1%}" if fig.ratio < 0.1 else f"{fig.ratio:.0%}"
        met = {None: "", True: "[green]yes[/]", False: "[red]no[/]"}[fig.met]
        table.add_row(
            fig.label, _fmt(fig.value, fig.unit), floor, ratio, fig.target, met, fig.notes
        )
        if key in SECTION_ENDS:
            table.add_section()
    console.print(table)
    if bench.table_stats:
        _render_stats(console, bench)
    for when, plans in bench.plans.items():
        console.print(f"[bold]Plans {when}[/] (EXPLAIN ANALYZE, node lines)")
        for name, lines in plans.items():
            console.print(f"  {name}:", markup=False, highlight=False)
            for line in lines:
                console.print(f"    {line}", markup=False, highlight=False)
    for when, sizes in bench.index_sizes.items():
        listed = ", ".join(f"{name} {size / 2**20:.1f} MiB" for name, size in sizes.items())
        console.print(f"Index sizes {when}: {listed}", markup=False, highlight=False)

    if bench.problems or bench.errors:
        console.print("[bold]Problems seen[/]")
        for line in bench.errors + bench.problems:
            console.print(f"  - {line}", markup=False, highlight=False)


def _render_stats(console: Console, bench: Bench) -> None:
    stats = Table(
        title="scheduled_tasks after each drain (pg_stat_user_tables)", title_justify="left"
    )
    for name in ("Run", "n_dead_tup", "n_tup_upd", "n_tup_hot_upd", "n_tup_del", "autovacuums"):
        stats.add_column(name, justify="left" if name == "Run" else "right")
    for st in bench.table_stats:
        cells = [st.n_dead_tup, st.n_tup_upd, st.n_tup_hot_upd, st.n_tup_del, st.autovacuum_count]
        run = st.run if st.settled else f"{st.run} (stats not settled)"
        stats.add_row(run, *("-" if c is None else f"{c:,}" for c in cells))
    console.print(stats)


def write_json(path: Path, bench: Bench, meta: dict[str, Any]) -> None:
    figures = []
    for fig in bench.figures.values():
        item = asdict(fig)
        item["ratio"] = fig.ratio
        figures.append(item)
    doc = {
        "meta": meta,
        "figures": figures,
        "table_stats": [asdict(st) for st in bench.table_stats],
        "plans": bench.plans,
        "index_sizes": bench.index_sizes,
        "problems": bench.problems,
        "errors": bench.errors,
    }
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")


def git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()


def source_fingerprint() -> str:
    """Hash of the library's sources, to notice code that changed during the run."""
    digest = hashlib.sha1()
    for path in sorted((ROOT / "sqla_scheduler").rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def load_average() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
