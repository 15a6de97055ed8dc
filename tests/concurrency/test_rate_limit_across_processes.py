"""``rate_limit`` holds across real worker processes: by the handlers' own records of
when they started, no second holds more starts than the limit, and every execution runs
once."""

from __future__ import annotations

from bisect import bisect_right

import pytest
from sqlalchemy import Engine

from tests.concurrency.app import build_scheduler, engine_of, one_time_task
from tests.support.workers import Workers, rows, scalar, wait_until

RATE, LIMIT = "20/s", 20
EXECUTIONS, PROCESSES = 200, 3


def most_in_a_second(starts_us: list[int]) -> int:
    """The most starts in any closed window of one second."""
    starts = sorted(starts_us)
    return max(bisect_right(starts, at + 1_000_000) - i for i, at in enumerate(starts))


def test_most_in_a_second_counts_closed_windows() -> None:
    assert most_in_a_second([0, 1_000_000, 1_000_001, 2_500_000]) == 2
    assert most_in_a_second([0, 500_000, 999_999, 1_000_000]) == 4


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgresql", "sqlite", "mariadb"])
def test_the_rate_limit_holds_across_processes(
    workers: Workers, app_db: Engine, db_url: str, backend: str
) -> None:
    """Slow by nature: 200 executions of a task limited to 20 starts a second take ten
    seconds to start, whatever the three processes sharing them do, on every database."""
    cluster = [
        workers.start(f"w{i}", CONCURRENCY=10, POLL_MS=100, RATE_LIMIT=RATE)
        for i in range(PROCESSES)
    ]
    workers.wait_started(*cluster)
    client = build_scheduler(db_url, name="client", rate_limit=RATE)
    try:
        rated = one_time_task(client, "rated")
        keys = [f"r{i:03d}" for i in range(EXECUTIONS)]
        assert client.schedule_batch(app_db, [rated.instance(key) for key in keys]) == EXECUTIONS
    finally:
        engine_of(client).dispose()
    started = "select count(*) from rated_starts"
    wait_until(lambda: scalar(app_db, started) == EXECUTIONS, 60, "the rated runs", workers.report)
    workers.stop(*cluster)
    found = rows(app_db, "select instance, worker, at_us from rated_starts")
    assert sorted(instance for instance, _, _ in found) == keys, "each ran once"
    starts = [at_us for _, _, at_us in found]
    assert most_in_a_second(starts) <= LIMIT, workers.report()
    span = (max(starts) - min(starts)) / 1e6
    # the limit keeps them from starting sooner; waking as the window opens, not at polls,
    # keeps them from starting much later (a window reopens 1.1 s after the one before:
    # its margin and the slack between a pick and its start, 50 ms each; _rate_store)
    assert EXECUTIONS / LIMIT - 1 <= span < 2 * EXECUTIONS / LIMIT
    by = {worker for _, worker, _ in found}
    assert len(by) >= 2, "more than one process took its turn"
