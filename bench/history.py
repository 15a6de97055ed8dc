"""What history costs the drain of succeeding executions: one async worker process, as
``drain_async_1``, with ``history`` set to ``none``, ``failures`` (the default, which
records no success) and ``all`` (an entry per success, written in the completer's batch).

The three settings are drained in turn, ``ROUNDS`` times, and each keeps its best round,
so that a slow moment of the machine does not land on one setting alone. After each drain
its database is vacuumed before the next begins: otherwise autovacuum cleans up the 40,000
dead rows of one drain on the second core while the next one runs.
"""

from __future__ import annotations

from bench.harness import Bench
from bench.results import Figure, better
from bench.scenarios import drain

ROUNDS = 2
SETTINGS = ("none", "failures", "all")


def history_drains(bench: Bench) -> dict[str, Figure]:
    """The drain with each ``history`` setting, keyed ``drain_history_<setting>``."""
    best: dict[str, Figure] = {}
    for _round in range(ROUNDS):
        for setting in SETTINGS:
            key = f"drain_history_{setting}"
            _db, figure = vacuumed_drain(
                bench,
                key,
                f"drain: 1 process, async, history={setting!r}",
                floor_key="drain_history_none",
                extra=["--history", setting],
            )
            best[key] = better(best.get(key), figure)
            figure.notes += f"; best of {ROUNDS} rounds"
    for figure in best.values():
        bench.add(figure)
    return best


def vacuumed_drain(
    bench: Bench, key: str, label: str, *, floor_key: str, extra: list[str]
) -> tuple[str, Figure]:
    """One 1-process async drain (``drain_async_1``, with ``extra`` options) on a database
    of its own, vacuumed after it so that the next drain does not meet autovacuum; the
    database's name and the drain's figure."""
    db = bench.new_db(key)
    figure = drain(bench, key, label, "async", 1, db=db, floor_key=floor_key, extra=extra)
    with bench.postgres.connect(db, autocommit=True) as conn:
        conn.execute("VACUUM")
    return db, figure
