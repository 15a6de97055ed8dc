"""A worker's machine clock steps an hour forward, then two hours back, while it and
another worker hold executions: with the default ``DatabaseClock`` nothing is revived
while its holder is alive, and nothing due later starts early (SPEC, "Running on time")."""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy import Engine, insert, text

from sqla_scheduler import DatabaseClock, ManualClock
from tests.concurrency.app import release
from tests.support.faults import FAST, remaining, schedule
from tests.support.workers import Workers, rows, scalar, wait_until

#: A heartbeat older than this is dead (``FAST``: 6 missed heartbeats of 250 ms).
DEAD_AFTER = 1.5
SLOW = 6


def step(path: Path, seconds: int) -> None:
    """Step the worker's machine clock to ``seconds`` off the true time (a file written
    whole, so the worker never reads half of it)."""
    written = path.with_suffix(".tmp")
    written.write_text(str(seconds))
    os.replace(written, path)


def test_a_clock_step_revives_nothing_and_starts_nothing_early(
    workers: Workers, app_db: Engine, db_url: str, tmp_path: Path
) -> None:
    step_file = tmp_path / "step"
    # At most four executions held per worker (no more picked ahead than run), so that
    # both hold some: three for the stepper alone, then three more shared.
    env = {**FAST, "CONCURRENCY": 4, "SLOW_DEADLINE_S": 60, "SQLA_SCHEDULER_PICK_UPPER_FRACTION": 1}
    stepper = workers.start("stepper", **env, STEP_FILE=step_file)
    workers.wait_started(stepper)

    def started() -> int:
        return int(scalar(app_db, "select count(*) from runs where phase = 'started'"))

    # Executions that run until released, heartbeating every 250 ms.
    schedule(db_url, app_db, "slow", [f"s-{i}" for i in range(SLOW // 2)])
    wait_until(lambda: started() == SLOW // 2, 30, "the stepper's executions", workers.report)
    holder = workers.start("holder", **env)
    workers.wait_started(holder)
    schedule(db_url, app_db, "slow", [f"s-{i}" for i in range(SLOW // 2, SLOW)])
    wait_until(lambda: started() == SLOW, 30, "the slow executions to start", workers.report)
    assert scalar(app_db, "select count(distinct worker) from runs") == 2
    later = scalar(app_db, "select now()") + timedelta(minutes=30)
    schedule(db_url, app_db, "record", [f"r-{i}" for i in range(5)], at=later)

    def damage() -> list[tuple[str, str, int]]:
        """Executions started more than once, or before their time."""
        return rows(
            app_db,
            "select task, instance, count(*) from runs where phase in ('started', 'done') "
            "group by task, instance having count(*) > 1 or task = 'record'",
        )

    def revived() -> bool:
        return any("revived dead execution" in w.output() for w in (holder, stepper))

    def after_step(seconds: int, what: str) -> None:
        logged = stepper.output().count("off the database's; corrected")
        step(step_file, seconds)
        # The stepper notices the step at its next maintenance pass and measures the
        # database's clock again, which it logs; today's clock revives at that pass.
        wait_until(
            lambda: (
                stepper.output().count("off the database's; corrected") > logged
                or revived()
                or bool(damage())
            ),
            10,
            f"the stepper to measure again after {what}",
            workers.report,
        )
        # Then watch a dead-execution window: a holder's executions would be revived,
        # or the stepper's own would look dead to the holder, within it.
        time.sleep(DEAD_AFTER)
        assert damage() == [], f"after {what}\n{workers.report()}"
        assert not revived(), f"after {what}\n{workers.report()}"

    after_step(3600, "a step an hour forward")
    after_step(-3600, "a step two hours back")

    with app_db.begin() as conn:
        conn.execute(insert(release).values(id=1))
    wait_until(lambda: remaining(app_db) == 5, 30, "the slow executions to finish")
    assert rows(
        app_db,
        "select count(*), count(distinct instance) from runs "
        "where task = 'slow' and phase = 'finished'",
    ) == [(SLOW, SLOW)]
    workers.stop(holder, stepper)


def test_the_database_clock_ignores_a_step_of_its_base(app_db: Engine) -> None:
    base = ManualClock()
    clock = DatabaseClock(base, refresh=timedelta(hours=1))
    with app_db.connect() as conn:
        offset = clock.measure(conn)
        before = clock.now()
        base.advance(timedelta(hours=1))
        assert clock.now() - before < timedelta(seconds=1)  # read on, not stepped
        assert clock.due()  # the step is noticed: measure again at once
        assert abs(clock.measure(conn) - offset + timedelta(hours=1)) < timedelta(seconds=1)
        assert not clock.due()
        base.set(base.now() - timedelta(hours=3))
        assert clock.now() - before < timedelta(seconds=1)
        assert clock.due()
        server = conn.scalar(text("select clock_timestamp()"))
    assert abs(clock.now() - server) < timedelta(seconds=1)
