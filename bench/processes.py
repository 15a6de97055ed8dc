"""How far one PostgreSQL carries: the 1-process async drain again with 2, 4 and 8 worker
processes sharing the table, connecting directly and through PgBouncer in transaction
mode (its defaults: 20 server connections per database), each beside the raw drain floor
(a) of the same run. On the bench's 2 cores the workers and the server share the CPU, so
the figures say where the table stops being the limit on such a machine, not how a
cluster of machines scales.
"""

from __future__ import annotations

from bench.harness import Bench
from bench.pooler import pooled_args
from bench.results import Figure
from bench.scenarios import drain

__all__ = ["PROCESSES", "drain_processes"]

#: The worker counts measured (1 is ``drain_async_1`` itself).
PROCESSES = (2, 4, 8)


def drain_processes(bench: Bench) -> list[Figure]:
    """``drain_processes_N`` and ``drain_processes_N_pgbouncer`` for each of ``PROCESSES``."""
    figures = []
    for n in PROCESSES:
        key = f"drain_processes_{n}"
        figures.append(drain(bench, key, f"drain: {n} processes, async", "async", n))
    for n in (1, *PROCESSES):
        key = f"drain_processes_{n}_pgbouncer"
        db = bench.new_db(key)
        label = f"drain: {n} process{'es' if n > 1 else ''}, async, through PgBouncer"
        figures.append(
            drain(
                bench,
                key,
                label,
                "async",
                n,
                db=db,
                extra=pooled_args(bench, db),
                url_of=bench.postgres.pooled_url,
            )
        )
    return figures
