"""A database outage does not flood the log (issue 46, item 8): a service that fails every
second logs the first failure in one line (the database's error without the statement),
a line a minute with how many followed, and one line when it works again; housekeeping
on a busy SQLite file says nothing unless the lock lasts a minute."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.dialects import sqlite
from sqlalchemy.exc import OperationalError

from sqla_scheduler._dialects import backend_for
from sqla_scheduler._runner.failures import REPEAT_EVERY, Failures


class Seconds:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def outage() -> OperationalError:
    return OperationalError(
        "SELECT scheduled_tasks.task_name FROM scheduled_tasks WHERE secret = %(p)s",
        {"p": "x"},
        ConnectionRefusedError("connection refused\nIs the server running?"),
    )


def test_a_minute_of_failures_every_second_is_three_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seconds = Seconds()
    failures = Failures("picking due executions", clock=seconds)
    with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
        for _ in range(int(REPEAT_EVERY) + 30):
            failures.failed(outage())
            seconds.now += 1
        failures.worked()
        failures.worked()  # once only
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "picking due executions failed: ConnectionRefusedError: connection refused; retrying",
        "picking due executions still fails: 60 failure(s) in the last 60s, the latest: "
        "ConnectionRefusedError: connection refused",
        "picking due executions works again, after 90 failure(s) over 90s",
    ]
    assert not any(r.exc_info for r in caplog.records)
    assert "SELECT" not in caplog.text


def test_an_error_that_is_not_the_databases_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    failures = Failures("maintenance", clock=Seconds())
    with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
        failures.failed(KeyError("a bug"))
        failures.failed(KeyError("a bug"))
    (record,) = caplog.records
    assert record.getMessage() == "maintenance failed; retrying"
    assert record.exc_info is not None


def _busy_sqlite(path: Path) -> OperationalError:
    """The error a write gets from SQLite while another connection holds the write lock."""
    holder = sqlite3.connect(path, isolation_level=None)
    engine = create_engine(f"sqlite:///{path}", connect_args={"timeout": 0.01})
    try:
        holder.execute("create table t (x)")
        holder.execute("begin immediate")
        with pytest.raises(OperationalError) as raised, engine.begin() as conn:
            conn.execute(text("insert into t values (1)"))
        return raised.value
    finally:
        holder.close()
        engine.dispose()


def test_maintenance_on_a_busy_sqlite_file_retries_quietly_for_a_minute(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A busy database (SQLite's write lock held by other writers past the busy timeout) is
    no outage: housekeeping retries without a word, and speaks only when it lasts."""
    busy = _busy_sqlite(tmp_path / "busy.db")
    quiet = backend_for(sqlite.dialect()).busy
    assert quiet(busy)
    assert not quiet(outage())
    seconds = Seconds()
    failures = Failures("maintenance", clock=seconds, quiet=quiet)
    with caplog.at_level(logging.WARNING, logger="sqla_scheduler"):
        for _ in range(3):  # a few passes that met the lock, then one that did not
            failures.failed(busy)
            seconds.now += 10
        failures.worked()
        assert caplog.records == []
        for _ in range(7):  # a lock that lasts a minute is worth a line
            failures.failed(busy)
            seconds.now += 10
        failures.worked()
    assert [r.getMessage() for r in caplog.records] == [
        "maintenance failed: OperationalError: database is locked; retrying",
        "maintenance works again, after 7 failure(s) over 70s",
    ]
