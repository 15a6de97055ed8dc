"""Repeated ``kill -9`` of workers in a cluster: nothing is lost, and the only executions
that run again are those that were in flight in a killed process."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import Engine

from tests.support.faults import FAST, SOAK, check_fault_runs, kill_repeatedly, remaining, schedule
from tests.support.workers import Workers, wait_until

#: The soak runs 10,000 executions killed for a minute (about two minutes on a 2-core
#: box); the suite runs 2,000, killed for at most 15 s.
EXECUTIONS = 10_000 if SOAK else 2_000
WORKERS = 3
#: Keep killing for this long (or until the queue is empty).
KILLING_FOR = 60.0 if SOAK else 15.0


@pytest.mark.slow
def test_repeated_sigkill_loses_nothing(workers: Workers, app_db: Engine, db_url: str) -> None:
    """Slow by nature: workers are killed every one to two seconds for as long as the
    queue lasts, and each kill's executions wait out the dead-execution window."""
    env = {**FAST, "CONCURRENCY": 4, "FAULT_SLEEP_MS": 50}
    live = [workers.start(f"w{i}-0", **env) for i in range(WORKERS)]
    workers.wait_started(*live)
    expected = {f"f-{i}" for i in range(EXECUTIONS)}
    assert schedule(db_url, app_db, "fault", sorted(expected)) == EXECUTIONS

    started = time.monotonic()
    killed = kill_repeatedly(
        workers, live, app_db, seconds=KILLING_FOR, pause=(1.0, 2.0), seed=7, **env
    )

    wait_until(lambda: remaining(app_db) == 0, 120, "the queue to drain", workers.report)
    elapsed = time.monotonic() - started
    figures = check_fault_runs(app_db, expected, killed)
    assert killed, "the run ended before the first kill"
    print(
        f"\nkill -9: {EXECUTIONS} executions on {WORKERS} workers, {len(killed)} SIGKILLs in "
        f"{elapsed:.1f}s; {figures['reruns']} re-run(s), all of executions in flight at a kill"
    )
    workers.wait_started(*live)  # a worker stops gracefully once its handlers are set
    workers.stop(*live)
    for worker in live:
        assert "Traceback" not in worker.output(), worker.output()
