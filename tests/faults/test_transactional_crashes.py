"""Exactly once for a transactional handler's writes: workers killed with ``kill -9``
over and over, many of them between the handler's write and the commit that records its
success. Every execution's write exists exactly once: a killed attempt's write went with
its transaction, and the attempt that ran again wrote it anew."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import Engine

from tests.support.faults import FAST, kill_repeatedly, remaining, schedule
from tests.support.workers import Workers, rows, wait_until

#: Executions, workers and how long to keep killing, per database (SQLite has one writer).
SIZES = {"postgresql": (1_500, 3, 15.0), "sqlite": (300, 2, 15.0), "mariadb": (1_000, 3, 15.0)}
#: On SQLite a heartbeat waits for the write lock that a running handler's transaction
#: holds: under load a live worker's heartbeats can be late by more than FAST's 1.5 s.
DEAD_AFTER = {"postgresql": FAST, "sqlite": {**FAST, "MISSED_LIMIT": 16}, "mariadb": FAST}


@pytest.mark.slow
def test_a_killed_attempts_writes_are_gone_and_each_write_exists_once(
    workers: Workers, app_db: Engine, db_url: str, backend: str, tmp_path: Path
) -> None:
    """Slow by nature: workers are killed every half second to second and a half while
    the queue lasts, and each kill's executions wait out the dead-execution window."""
    executions, size, killing_for = SIZES[backend]
    log = tmp_path / "effect-starts.log"
    env = {**DEAD_AFTER[backend], "CONCURRENCY": 4, "EFFECT_SLEEP_MS": 20, "EFFECT_LOG": log}
    live = [workers.start(f"w{i}-0", **env) for i in range(size)]
    workers.wait_started(*live)
    expected = {f"e-{i}" for i in range(executions)}
    assert schedule(db_url, app_db, "effect", sorted(expected)) == executions

    started = time.monotonic()
    killed = kill_repeatedly(
        workers, live, app_db, seconds=killing_for, pause=(0.5, 1.5), seed=11, **env
    )

    wait_until(lambda: remaining(app_db) == 0, 120, "the queue to drain", workers.report)
    elapsed = time.monotonic() - started
    assert killed, "the run ended before the first kill"

    written = Counter(instance for (instance,) in rows(app_db, "select instance from effects"))
    missing = sorted(expected - set(written))[:20]
    assert not missing, f"no write for {missing}: {_what_became_of(app_db, log, missing)}"
    twice = {i: n for i, n in written.items() if n > 1}
    assert twice == {}, f"written more than once: {dict(list(twice.items())[:20])}"

    starts = [line.split() for line in log.read_text().splitlines()]
    by_instance = Counter(instance for instance, _ in starts)
    rerun = {i for i, n in by_instance.items() if n > 1}
    # Some attempts were cut between their write and its commit (they started in a
    # process that was killed, and ran again): without the shared transaction, each of
    # those would have written twice.
    assert rerun, "no attempt was in flight at a kill: the test proved nothing"
    in_killed = {i for i, pid in starts if int(pid) in killed and i in rerun}
    assert in_killed == rerun
    print(
        f"\ntransactional kill -9 ({backend}): {executions} executions on {size} workers, "
        f"{len(killed)} SIGKILLs in {elapsed:.1f}s; {len(rerun)} attempt(s) cut by a kill "
        f"and run again; every write exactly once"
    )
    workers.wait_started(*live)
    workers.stop(*live)
    for worker in live:
        assert "Traceback" not in worker.output(), worker.output()


def _what_became_of(app_db: Engine, log: Path, instances: list[str]) -> str:
    """What history and the start log say of ``instances`` (for a failure's message)."""
    entries = rows(
        app_db,
        "select task_instance, outcome, attempt, picked_by, error from scheduled_tasks_history"
        " where task_name = 'effect' order by id",
    )
    starts = [line.split() for line in log.read_text().splitlines()]
    return "; ".join(
        f"{i}: history {[(*e[1:4], str(e[4])[:300]) for e in entries if e[0] == i]},"
        f" started in pids {[pid for name, pid in starts if name == i]}"
        for i in instances
    )
