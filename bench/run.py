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

This module is the entry point only (arguments, the cluster and its cleanup). The parts
live beside it: ``suite`` (which scenarios run, their floors and targets), ``floors``
(raw SQL), ``scenarios`` (the library's), ``harness`` (what they share), ``workers``
(the ``worker.py`` processes), ``results`` (settings and figures), ``report`` (tables, JSON).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from types import FrameType

import psycopg
import sqlalchemy
from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.harness import Bench, utc_now  # noqa: E402
from bench.report import git_revision, load_average, render, source_fingerprint, write_json  # noqa: E402
from bench.results import Counts  # noqa: E402
from bench.suite import SCENARIOS, run_all  # noqa: E402
from bench.workers import stop_all  # noqa: E402
from tests._postgres import PostgresCluster  # noqa: E402


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
    load_before = load_average()
    revision, fingerprint = git_revision(), source_fingerprint()
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
        if source_fingerprint() != fingerprint:
            bench.problems.append(
                "sqla_scheduler sources changed during the run: the figures mix versions "
                f"(started at {revision}, sources {fingerprint}; ended at {git_revision()}, "
                f"sources {source_fingerprint()})"
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
            write_json(args.json, bench, meta)
            console.print(f"figures written to {args.json}", highlight=False)
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
