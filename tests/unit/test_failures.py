"""A database outage does not flood the log (issue 46, item 8): a service that fails every
second logs the first failure in one line (the database's error without the statement),
a line a minute with how many followed, and one line when it works again."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy.exc import OperationalError

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
