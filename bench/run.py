"""sqla-scheduler benchmark: every figure beside its raw-SQL floor, measured in the same run.

Starts its own durable throwaway server (PostgreSQL with fsync on, or MariaDB flushing its
log at each commit), runs the scenarios below against a fresh database each, prints one
table, and stops the server (and every worker process it started) at the end, also on
failure or Ctrl-C::

    python bench/run.py                      # full run on PostgreSQL (a few minutes)
    python bench/run.py --database mariadb   # on MariaDB; --database all: both, in turn
    python bench/run.py --quick              # smaller counts, for a smoke test
    python bench/run.py --json out.json

Scenarios: raw floors (drain, one INSERT per commit, executemany per commit); drain of due
no-op executions by worker processes (``bench/worker.py``); commit-to-start latency of an
idle worker and of a scheduler in the scheduling process; ``Scheduler.schedule`` one per
transaction; ``Scheduler.schedule_batch``; the drain of a handler reporting progress and the
latency of a stop request (``steering``). See ``bench/README.md``.

This module is the entry point only (arguments, the server and its cleanup). The parts
live beside it: ``suite`` (which scenarios run, their floors and targets), ``databases``
(each server, and the raw SQL that differs), ``floors`` (raw SQL), ``scenarios`` (the
library's), ``harness`` (what they share), ``workers`` (the ``worker.py`` processes),
``results`` (settings and figures), ``report`` (tables, JSON).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import sqlalchemy
from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.databases import DATABASES, database  # noqa: E402
from bench.harness import Bench, serving, utc_now  # noqa: E402
from bench.report import git_revision, load_average, render, source_fingerprint, write_json  # noqa: E402
from bench.results import Counts  # noqa: E402
from bench.suite import SCENARIOS, run_all  # noqa: E402


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="sqla-scheduler benchmark")
    parser.add_argument(
        "--database",
        choices=(*DATABASES, "all"),
        default="postgresql",
        help="the server to measure (default postgresql); all: each in turn, a table each",
    )
    parser.add_argument("--quick", action="store_true", help="smaller counts (smoke test)")
    parser.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="also write figures as JSON (with --database all: out.json -> out.<database>.json)",
    )
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
    return parser.parse_args(argv)


def _json_path(path: Path, name: str, several: bool) -> Path:
    return path.with_name(f"{path.stem}.{name}{path.suffix or '.json'}") if several else path


def _measure(name: str, args: argparse.Namespace, console: Console, several: bool) -> int:
    """Run the suite on a new server of database ``name``, print its table; the number of
    scenarios that failed."""
    counts = Counts.quick() if args.quick else Counts()
    server = database(name)
    started = time.monotonic()
    load_before = load_average()
    revision, fingerprint = git_revision(), source_fingerprint()
    with serving(server):
        version, durability = server.describe()
        bench = Bench(server, counts, args.polling_interval)
        run_all(bench, args.only)
        if source_fingerprint() != fingerprint:
            bench.problems.append(
                "sqla_scheduler sources changed during the run: the figures mix versions "
                f"(started at {revision}, sources {fingerprint}; ended at {git_revision()}, "
                f"sources {source_fingerprint()})"
            )
        meta = {
            "quick": args.quick,
            "database": server.name,
            "server": server.title,
            "server_version": version,
            "durability": durability,
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "sqlalchemy": sqlalchemy.__version__,
            "drivers": {d: importlib.metadata.version(d) for d in server.drivers},
            "revision": revision,
            "sources_sha1": fingerprint,
            "polling_interval_s": args.polling_interval,
            "counts": asdict(counts),
            "when": utc_now().isoformat(timespec="seconds"),
            "duration_s": round(time.monotonic() - started, 1),
            "loadavg_1m_before_after": [load_before, load_average()],
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
            path = _json_path(args.json, name, several)
            write_json(path, bench, meta)
            console.print(f"figures written to {path}", highlight=False)
    return len(bench.errors)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    console = Console(width=None if sys.stdout.isatty() else 200)
    names = list(DATABASES) if args.database == "all" else [args.database]
    errors = 0
    for name in names:
        errors += _measure(name, args, console, several=len(names) > 1)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
