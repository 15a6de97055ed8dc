"""Under ``sqla-scheduler worker``, a handler's ``SystemExit(0)`` or
``KeyboardInterrupt`` is a failure of its execution: the process goes on running the
queue, and only a signal stops it (issue 13, defect 6, in a real process)."""

from __future__ import annotations

import signal
import time

from sqlalchemy import Engine

from tests.support.faults import FAST, schedule
from tests.support.workers import Workers, scalar


def test_a_handlers_system_exit_does_not_end_the_worker(
    workers: Workers, app_db: Engine, db_url: str
) -> None:
    worker = workers.start("w0", **FAST, MAX_RETRIES=0)
    workers.wait_started(worker)
    schedule(db_url, app_db, "poison", ["exit-0", "interrupt-0"])
    schedule(db_url, app_db, "poison", [f"ok-{i}" for i in range(10)])
    deadline = time.monotonic() + 60
    while scalar(app_db, "select count(*) from runs where phase = 'done'") < 10:
        assert worker.proc.poll() is None, workers.report()
        assert time.monotonic() < deadline, workers.report()
        time.sleep(0.05)
    assert scalar(app_db, "select count(*) from runs where phase = 'raised'") == 2
    assert worker.proc.poll() is None, "the worker is still running"
    worker.signal(signal.SIGTERM)
    assert worker.proc.wait(timeout=30) == 0, workers.report()
    report = workers.report()
    assert "execution poison/exit-0 failed" in report, report
    assert "execution poison/interrupt-0 failed" in report, report
