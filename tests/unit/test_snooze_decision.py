"""The snooze in the outcome policy, without a database: what ``Snooze(delay)`` comes
to, and which delays are refused, naming the task and the problem."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from sqla_scheduler import (
    Execution,
    FixedDelay,
    SchedulerConfig,
    Snooze,
    TaskDefinitionError,
    one_time,
    recurring,
)
from sqla_scheduler._runner import outcomes
from sqla_scheduler.models import INT_MAX
from tests.support import builders
from tests.support.clocks import NOW


def noop(ctx: Any) -> None: ...


def policy(task: Any, execution: Execution) -> outcomes.Policy:
    """``execution``'s outcome policy, under the default config."""
    return outcomes.policy_of(task, execution, SchedulerConfig())


ONE_TIME = one_time("poll")(noop)
HOURLY = recurring("poll", FixedDelay(timedelta(hours=1)))(noop)


def picked(*, snoozes: int = 0, failures: int = 0) -> Execution:
    """A picked execution of ``poll`` that failed ``failures`` times and snoozed
    ``snoozes`` times, due five seconds ago."""
    return builders.picked(
        failures=failures,
        task_name="poll",
        instance_id="a",
        data={"n": 1},
        last_error="RuntimeError: earlier" if failures else None,
        payload_version=3,
        snoozes=snoozes,
    )


@pytest.mark.parametrize(
    "delay",
    [
        timedelta(minutes=5),
        300,
        300.0,
        NOW + timedelta(minutes=5),
        (NOW + timedelta(minutes=5)).astimezone(timezone(timedelta(hours=-7))),
    ],
)
@pytest.mark.parametrize("task", [ONE_TIME, HOURLY])
def test_a_snooze_hands_the_row_back_for_then_with_one_more_snooze(delay: Any, task: Any) -> None:
    execution = picked(snoozes=4, failures=2)
    started = NOW - timedelta(seconds=1)
    done = outcomes.snoozed(policy(task, execution), Snooze(delay), now=NOW, started_at=started)
    assert done.kind == "snooze"
    assert done.at == NOW + timedelta(minutes=5)
    assert (done.snoozes, done.outcome, done.started_at) == (5, "snoozed", started)
    # nothing of the failures, the error or the payload: the statement keeps the row's
    assert (done.failures, done.error, done.data, done.payload_version) == (0, None, None, None)
    entry = done.entry()
    assert (entry.outcome, entry.attempt, entry.error) == ("snoozed", 3, None)


def test_the_count_stays_at_the_columns_largest_value() -> None:
    done = outcomes.snoozed(policy(ONE_TIME, picked(snoozes=INT_MAX)), Snooze(0), now=NOW)
    assert (done.at, done.snoozes) == (NOW, INT_MAX)


@pytest.mark.parametrize(
    ("delay", "problem"),
    [
        (datetime(2030, 5, 17, 13, 0), "a naive datetime"),
        (timedelta(microseconds=-1), "a negative delay"),
        (-1, "a negative delay"),
        (float("nan"), "not a delay"),
        (float("inf"), "not a delay"),
        (True, "not a delay"),
        ("5m", "not a delay"),
        (None, "not a delay"),
        (timedelta(days=999_999_999), "a delay past the year 9999"),
        (1e300, "a delay past the year 9999"),
        (datetime(1, 1, 1, tzinfo=timezone.utc), "outside"),
    ],
)
def test_a_delay_that_is_not_one_is_refused_naming_the_task_and_the_problem(
    delay: Any, problem: str
) -> None:
    with pytest.raises(TaskDefinitionError, match=r"^task 'poll': Snooze\(") as raised:
        outcomes.snoozed(policy(ONE_TIME, picked()), Snooze(delay), now=NOW)
    assert problem in str(raised.value)


def test_the_snooze_keeps_what_the_handler_gave() -> None:
    snooze = Snooze(timedelta(seconds=3))
    assert snooze.delay == timedelta(seconds=3)
    assert isinstance(snooze, Exception)
