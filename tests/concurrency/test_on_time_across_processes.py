"""Work another process schedules for later starts at its time in a worker process, with
the default 10 s poll: the scheduling transaction's NOTIFY carries the time (issue 14)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from sqlalchemy import Engine

from tests.support.faults import schedule
from tests.support.workers import Workers, rows


def test_later_work_from_another_process_starts_at_its_time(
    workers: Workers, app_db: Engine, db_url: str
) -> None:
    worker = workers.start("w0", POLL_MS=10_000)
    workers.wait_started(worker)
    due: dict[str, datetime] = {}
    for i in range(3):
        at = datetime.now().astimezone() + timedelta(milliseconds=800 + 300 * i)
        schedule(db_url, app_db, "record", [f"r{i}"], at=at)
        due[f"r{i}"] = at
    deadline = time.monotonic() + 30
    while len(started := dict(rows(app_db, "select instance, at from runs"))) < len(due):
        assert time.monotonic() < deadline, workers.report()
        time.sleep(0.05)
    workers.stop(worker)
    for instance, at in due.items():
        late = started[instance] - at
        # never early; far within the 10 s poll (the handler's commit time is the mark)
        assert timedelta(milliseconds=-50) <= late < timedelta(milliseconds=1500), (
            instance,
            late,
        )
