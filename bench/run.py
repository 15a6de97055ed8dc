"""sqla-scheduler benchmark: every figure beside its raw-SQL floor, measured in the same run.

Starts its own durable (fsync on) PostgreSQL cluster, runs the scenarios below against a
fresh database each, prints one table, and stops the cluster (and every worker process it
started) at the end, also on failure or Ctrl-C::

    python bench/run.py            # full run (a few minutes)
    python bench/run.py --quick    # smaller counts, for a smoke test
    python bench/run.py --json out.json

Scenarios: raw psycopg floors (drain, one INSERT per commit, executemany per commit); drain
of due no-op executions by worker processes (``bench/worker.py``); commit-to-start latency
of an idle worker; ``Scheduler.schedule`` one per transaction; ``Scheduler.schedule_batch``.
See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg
import sqlalchemy
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.harness import Bench, utc_now  # noqa: E402
from bench.results import Counts  # noqa: E402
from bench.suite import SCENARIOS, run_all  # noqa: E402
from bench.workers import stop_all  # noqa: E402
from tests._postgres import PostgresCluster  # noqa: E402

# --- output ------------------------------------------------------------------------------


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
}


def render(console: Console, bench: Bench, meta: dict[str, Any]) -> None:
    table = Table(
        title=(
            f"sqla-scheduler benchmark ({'quick' if meta['quick'] else 'full'} run, "
            f"PostgreSQL {meta['postgres']}, fsync on, {meta['cpus']} CPUs)"
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
    order = [
        "floor_drain",
        "floor_single",
        "floor_batch",
        "drain_async_1",
        "drain_sync_1",
        "drain_async_2",
        "latency_p50",
        "latency_p95",
        "latency_p99",
        "schedule",
        "schedule_batch",
    ]
    for key in order:
        fig = bench.figures.get(key)
        if fig is None:
            continue
        floor = (
            f"{_fmt(fig.floor, fig.unit)} {FLOOR_SHORT.get(fig.floor_key or '', '')}".strip()
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
        if key in ("floor_batch", "drain_async_2", "latency_p99"):
            table.add_section()
    console.print(table)

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

    if bench.problems or bench.errors:
        console.print("[bold]Problems seen[/]")
        for line in bench.errors + bench.problems:
            console.print(f"  - {line}", markup=False, highlight=False)


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
        "problems": bench.problems,
        "errors": bench.errors,
    }
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")


def _git_revision() -> str:
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


def _source_fingerprint() -> str:
    """Hash of the library's sources, to notice code that changed during the run."""
    digest = hashlib.sha1()
    for path in sorted((ROOT / "sqla_scheduler").rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


class _Terminated(BaseException):
    """SIGTERM arrived: unwind so the workers and the cluster are stopped."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated(f"signal {signum}")


@contextlib.contextmanager
def _cleanup(cluster: PostgresCluster) -> Iterator[None]:
    try:
        yield
    finally:
        stop_all(5)
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sqla-scheduler benchmark")
    parser.add_argument("--quick", action="store_true", help="smaller counts (smoke test)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write figures as JSON")
    parser.add_argument(
        "--polling-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="workers' polling_interval (default 10: only wake-ups explain quick starts)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=SCENARIOS,
        default=[],
        metavar="SCENARIO",
        help=(
            "run only this scenario and the floor it is compared with; repeatable "
            f"(one of: {', '.join(SCENARIOS)})"
        ),
    )
    args = parser.parse_args(argv)
    counts = Counts.quick() if args.quick else Counts()
    console = Console(width=None if sys.stdout.isatty() else 200)

    # Our own handler first: the cluster module then leaves SIGTERM alone, and a SIGTERM
    # unwinds through the finally blocks that stop workers and cluster.
    signal.signal(signal.SIGTERM, _on_sigterm)
    cluster = PostgresCluster(durable=True)
    started = time.monotonic()
    load_before = _load()
    revision, fingerprint = _git_revision(), _source_fingerprint()
    print("[bench] starting a durable PostgreSQL cluster ...", file=sys.stderr, flush=True)
    cluster.start()
    with _cleanup(cluster):
        with cluster.connect() as conn:
            row = conn.execute("SHOW server_version").fetchone()
            fsync = conn.execute("SHOW fsync").fetchone()
        assert row is not None
        assert fsync is not None
        if fsync[0] != "on":
            raise SystemExit("the benchmark cluster must run with fsync on")
        bench = Bench(cluster, counts, args.polling_interval)
        run_all(bench, args.only)
        if _source_fingerprint() != fingerprint:
            bench.problems.append(
                "sqla_scheduler sources changed during the run: the figures mix versions "
                f"(started at {revision}, sources {fingerprint}; ended at {_git_revision()}, "
                f"sources {_source_fingerprint()})"
            )
        meta = {
            "quick": args.quick,
            "postgres": row[0].split()[0],
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "sqlalchemy": sqlalchemy.__version__,
            "psycopg": psycopg.__version__,
            "revision": revision,
            "sources_sha1": fingerprint,
            "polling_interval_s": args.polling_interval,
            "counts": asdict(counts),
            "when": utc_now().isoformat(timespec="seconds"),
            "duration_s": round(time.monotonic() - started, 1),
            "loadavg_1m_before_after": [load_before, _load()],
        }
        render(console, bench, meta)
        console.print(
            f"revision {meta['revision']} (sources {fingerprint}), {meta['duration_s']}s; "
            f"workers polling_interval {args.polling_interval:g}s; 1-min load average "
            f"{load_before} before, {meta['loadavg_1m_before_after'][1]} after "
            f"(other processes on the box skew every figure)",
            highlight=False,
        )
        if args.json:
            write_json(args.json, bench, meta)
            console.print(f"figures written to {args.json}", highlight=False)
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
