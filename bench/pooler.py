"""Through PgBouncer in transaction mode (PostgreSQL): a drain and commit-to-start latency
with the workers' statements going through the pooler and their LISTEN on a direct
connection (``listen_url``), each compared with its direct counterpart in the same run.

The bouncer runs with its defaults (20 server connections per database) in front of the
bench's cluster; workers and this process prepare no statements (``--no-prepare``), as
PgBouncer 1.18 requires.
"""

from __future__ import annotations

from functools import partial

from bench.harness import Bench
from bench.results import Figure
from bench.scenarios import _percentiles, _starts_after, drain, latency_commits

__all__ = ["drain_pgbouncer", "latency_pgbouncer", "pooled_args"]


def pooled_args(bench: Bench, db: str) -> list[str]:
    """The worker's arguments for ``db``: no prepares, LISTEN on the direct URL."""
    return ["--no-prepare", "--listen-url", bench.url(db)]


def drain_pgbouncer(bench: Bench) -> Figure:
    """``drain_async_1`` with the worker's statements through the pooler."""
    db = bench.new_db("drain_pgbouncer")
    return drain(
        bench,
        "drain_pgbouncer",
        "drain: 1 process, async handlers, through PgBouncer",
        "async",
        1,
        db=db,
        extra=pooled_args(bench, db),
        url_of=bench.postgres.pooled_url,
    )


def latency_pgbouncer(bench: Bench) -> list[Figure]:
    """``latency`` with this process committing and the worker picking through the pooler,
    and the worker's LISTEN on a direct connection (``listen_url``); the direct ``latency``
    measured just before it (``latency_pgbouncer_direct``) is what it is compared with, as
    the machine's pace moves over a full run."""
    direct = _starts_after(bench, "latency_pgbouncer_direct", latency_commits(bench))
    _percentiles(
        bench,
        "latency_pgbouncer_direct",
        "commit-to-start latency, direct, just before",
        direct,
        {},
    )
    delays = _starts_after(
        bench,
        "latency_pgbouncer",
        latency_commits(bench),
        extra_of=partial(pooled_args, bench),
        url_of=bench.postgres.pooled_url,
    )
    label = "commit-to-start latency through PgBouncer (listen_url direct)"
    return _percentiles(bench, "latency_pgbouncer", label, delays, {})
