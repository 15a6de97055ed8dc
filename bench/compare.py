"""Compare two revisions back to back: the same scenarios, alternating, on this machine.

::

    python bench/compare.py af4061b --only drain_async_1 --only drain_sync_1 --rounds 10

Checks ``BASE`` out into a temporary git worktree, then runs ``bench/run.py --only ...``
alternately in that worktree and in this checkout, ``--rounds`` times each, and prints
each figure's median, lowest and highest per side and the ratio of the medians. Each side
runs its own ``bench/run.py`` with ``PYTHONPATH`` set to its own tree: the worker
processes are started as scripts (``python bench/worker.py``), so without it both sides'
workers would import whichever ``sqla_scheduler`` is installed. A figure is compared only
when both sides report it; run-to-run spread on a shared machine is often 10% or more,
which is why the lowest and highest are printed beside the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("base", help="the revision to compare this checkout with")
    parser.add_argument("--only", action="append", required=True, help="a bench/run.py scenario")
    parser.add_argument("--rounds", type=int, default=5, help="runs per side (default 5)")
    parser.add_argument("--quick", action="store_true", help="pass --quick to bench/run.py")
    return parser.parse_args(argv)


def _run(tree: Path, args: argparse.Namespace, out: Path) -> dict[str, tuple[float, str]]:
    """One ``bench/run.py`` in ``tree``: its figures by key, as (value, unit)."""
    argv = [sys.executable, "bench/run.py", "--json", str(out)]
    argv += [arg for key in args.only for arg in ("--only", key)]
    if args.quick:
        argv.append("--quick")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(argv, cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(
            f"bench/run.py failed in {tree}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    figures = json.loads(out.read_text())["figures"]
    return {f["key"]: (f["value"], f["unit"]) for f in figures if f["value"] is not None}


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    console = Console(stderr=True)
    sides: dict[str, defaultdict[str, list[float]]] = {
        "base": defaultdict(list),
        "this": defaultdict(list),
    }
    units: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        base = Path(tmp) / "base"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(base), args.base], cwd=ROOT, check=True
        )
        try:
            for i in range(1, args.rounds + 1):
                for side, tree in (("base", base), ("this", ROOT)):
                    console.print(
                        f"[bench compare] round {i}/{args.rounds}: {side} ...", markup=False
                    )
                    for key, (value, unit) in _run(tree, args, Path(tmp) / f"{side}.json").items():
                        sides[side][key].append(value)
                        units[key] = unit
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT)
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    table = Table(
        title=f"{args.base} (base) against {head} (this checkout), {args.rounds} runs each"
    )
    for column in (
        "Figure",
        "Unit",
        "Base median",
        "Base range",
        "This median",
        "This range",
        "This/base",
    ):
        table.add_column(column, justify="left" if column in ("Figure", "Unit") else "right")
    for key in sides["this"]:
        a, b = sides["base"].get(key), sides["this"][key]
        if not a:
            continue
        ratio = statistics.median(b) / statistics.median(a)
        table.add_row(
            key,
            units[key],
            f"{statistics.median(a):,.1f}",
            f"{min(a):,.1f}-{max(a):,.1f}",
            f"{statistics.median(b):,.1f}",
            f"{min(b):,.1f}-{max(b):,.1f}",
            f"{ratio:.1%}",
        )
    Console(width=140).print(table)


if __name__ == "__main__":
    main()
