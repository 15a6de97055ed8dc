"""Repeated ``kill -9`` of workers in a cluster: nothing is lost, and the only executions
that run again are those that were in flight in a killed process."""

from __future__ import annotations

import os
import random
import signal
import time

from sqlalchemy import Engine

from tests.concurrency.conftest import Workers, wait_until
from tests.faults.conftest import FAST, check_fault_runs, remaining, schedule

#: The issue's 10,000; about a minute on a 2-core box.
EXECUTIONS = 10_000
WORKERS = 3
#: Keep killing for this long (or until the queue is empty).
KILLING_FOR = 60.0


def test_repeated_sigkill_loses_nothing(workers: Workers, app_db: Engine, db_url: str) -> None:
    env = {**FAST, "CONCURRENCY": 4, "FAULT_SLEEP_MS": 50}
    generation = 0
    live = [workers.start(f"w{i}-0", **env) for i in range(WORKERS)]
    workers.wait_started(*live)
    expected = {f"f-{i}" for i in range(EXECUTIONS)}
    assert schedule(db_url, app_db, "fault", sorted(expected)) == EXECUTIONS

    rng = random.Random(7)
    killed: set[int] = set()
    started = time.monotonic()
    while remaining(app_db) and time.monotonic() - started < KILLING_FOR:
        time.sleep(rng.uniform(1.0, 2.0))
        slot = rng.randrange(WORKERS)
        victim = live[slot]
        os.kill(victim.pid, signal.SIGKILL)
        assert victim.proc.wait(timeout=30) == -signal.SIGKILL
        killed.add(victim.pid)
        generation += 1
        live[slot] = workers.start(f"w{slot}-{generation}", **env)

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
