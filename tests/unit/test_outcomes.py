"""The outcome policy, without a database: a handler's result or error -> what to record."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from sqla_scheduler import (
    KEEP,
    Disabled,
    Execution,
    FixedDelay,
    NextAt,
    custom,
    one_time,
    recurring,
)
from sqla_scheduler._runner import outcomes
from sqla_scheduler._runner.outcomes import Abandon
from sqla_scheduler.exceptions import PayloadError
from sqla_scheduler.models import INT_MAX
from tests.support import NOW
from tests.support.builders import RETRY_CONFIG, picked

CONFIG = RETRY_CONFIG.replace(max_retries=3)


def execution(task: str = "job", *, failures: int = 0, data: Any = None) -> Execution:
    """A picked execution of ``task``, due five seconds ago."""
    return picked(failures=failures, task_name=task, data=data)


def policy(task: Any, execution: Execution) -> outcomes.Policy:
    """``execution``'s outcome policy, under ``CONFIG``."""
    return outcomes.policy_of(task, execution, CONFIG)


def noop(ctx: Any) -> None: ...


ONE_TIME = one_time("job")(noop)
CUSTOM = custom("job")(noop)
HOURLY = recurring("job", FixedDelay(timedelta(hours=1)))(noop)
DISABLED = recurring("job", Disabled())(noop)


def test_a_one_time_success_removes_the_row() -> None:
    done = outcomes.succeeded(policy(ONE_TIME, execution()), None, now=NOW)
    assert (done.kind, done.now) == ("remove", NOW)


def test_a_recurring_success_hands_the_row_back_at_its_next_run() -> None:
    done = outcomes.succeeded(policy(HOURLY, execution(data={"n": 1})), None, now=NOW)
    assert (done.kind, done.at, done.data) == ("succeed", NOW + timedelta(hours=1), {"n": 1})
    kept = outcomes.succeeded(policy(HOURLY, execution(data={"n": 1})), {"n": 2}, now=NOW)
    assert kept.data == {"n": 2}, "a recurring handler's return value is its next payload"


def test_a_disabled_recurring_success_removes_the_row() -> None:
    assert outcomes.succeeded(policy(DISABLED, execution()), None, now=NOW).kind == "remove"


def test_a_custom_task_decides_its_next_run() -> None:
    at = NOW + timedelta(minutes=5)
    again = outcomes.succeeded(policy(CUSTOM, execution(data=[1])), NextAt(at, KEEP), now=NOW)
    assert (again.kind, again.at, again.data) == ("succeed", at, [1])
    moved = outcomes.succeeded(policy(CUSTOM, execution(data=[1])), NextAt(at, [2]), now=NOW)
    assert moved.data == [2]
    assert outcomes.succeeded(policy(CUSTOM, execution()), None, now=NOW).kind == "remove"


@pytest.mark.parametrize(
    ("task", "result", "message"),
    [
        (CUSTOM, "soon", "return NextAt"),
        (ONE_TIME, NextAt(NOW), "only custom tasks reschedule"),
    ],
)
def test_results_a_kind_cannot_return_are_refused(task: Any, result: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        outcomes.succeeded(policy(task, execution()), result, now=NOW)


def test_a_failure_retries_with_backoff() -> None:
    first = outcomes.failed(policy(ONE_TIME, execution()), RuntimeError(), now=NOW)
    assert not isinstance(first, Abandon)
    assert (first.kind, first.failures, first.at) == ("fail", 1, NOW + timedelta(seconds=30))
    third = outcomes.failed(policy(ONE_TIME, execution(failures=2)), RuntimeError(), now=NOW)
    assert not isinstance(third, Abandon)
    assert (third.failures, third.at) == (3, NOW + timedelta(seconds=120))


def test_a_failure_past_max_retries_is_abandoned() -> None:
    error = RuntimeError("last")
    gone = outcomes.failed(policy(ONE_TIME, execution(failures=3)), error, now=NOW)
    assert isinstance(gone, Abandon)
    assert (gone.failures, gone.error) == (4, error)
    # never raised: no traceback; the rule that gave up follows the error
    assert gone.last_error == "RuntimeError: last\n(retry limit 3)"


def test_a_failure_keeps_its_error_text() -> None:
    try:
        raise KeyError("missing")
    except KeyError as exc:
        error = exc
    retry = outcomes.failed(policy(ONE_TIME, execution()), error, now=NOW)
    assert not isinstance(retry, Abandon)
    assert retry.error is not None
    assert retry.error.startswith("KeyError: 'missing'\nTraceback (most recent call last):\n")
    assert retry.error.endswith('raise KeyError("missing")')


def test_a_recurring_retry_waits_no_longer_than_its_next_run() -> None:
    minutely = recurring("job", FixedDelay(timedelta(minutes=1)))(noop)
    retry = outcomes.failed(policy(minutely, execution(failures=10)), RuntimeError(), now=NOW)
    assert not isinstance(retry, Abandon), "a recurring task is never abandoned"
    assert retry.at == NOW + timedelta(minutes=1)


def test_a_disabled_recurring_failure_is_abandoned() -> None:
    assert isinstance(
        outcomes.failed(policy(DISABLED, execution()), RuntimeError(), now=NOW), Abandon
    )


def test_spent_executions_are_abandoned_before_they_run() -> None:
    assert outcomes.spent(policy(ONE_TIME, execution(failures=3))) is None
    spent = outcomes.spent(
        policy(ONE_TIME, replace(execution(failures=4), last_error="ValueError: x"))
    )
    assert spent is not None
    assert spent.error is None
    assert spent.last_error == "ValueError: x", "the row's error, for the hook"
    assert outcomes.spent(policy(HOURLY, execution(failures=99))) is None


def test_a_failed_abandon_is_kept_and_counted() -> None:
    abandon = Abandon(execution=execution(failures=3), failures=4, last_error="ValueError: x")
    kept = outcomes.abandon_failed(abandon, now=NOW, config=CONFIG)
    assert (kept.kind, kept.failures, kept.error) == ("fail", 5, "ValueError: x")


@pytest.mark.parametrize(
    ("stored", "counted"),
    [(-5, 1), (-1, 1), (0, 1), (7, 8), (INT_MAX - 1, INT_MAX), (INT_MAX, INT_MAX)],
)
def test_failure_counts_stay_within_the_column(stored: int, counted: int) -> None:
    failed = outcomes.failed(policy(HOURLY, execution(failures=stored)), RuntimeError(), now=NOW)
    assert not isinstance(failed, Abandon)
    assert failed.failures == counted


def test_undecodable_and_released_executions() -> None:
    set_aside = outcomes.undecodable(ONE_TIME, execution(), PayloadError("bad shape"), NOW)
    assert (set_aside.kind, set_aside.outcome) == ("undecodable", "undecodable")
    assert "bad shape" in (set_aside.error or "")
    released = outcomes.release(replace(execution(), version=9), NOW)
    assert (released.kind, released.execution.version, released.outcome) == ("release", 9, None)


def test_outcomes_name_their_history_entries() -> None:
    started = NOW - timedelta(seconds=3)
    done = outcomes.succeeded(policy(ONE_TIME, execution()), None, now=NOW, started_at=started)
    assert (done.outcome, done.started_at, done.entry().attempt) == ("succeeded", started, 1)
    failed = outcomes.failed(
        policy(HOURLY, execution(failures=2)), RuntimeError("x"), now=NOW, started_at=started
    )
    assert not isinstance(failed, Abandon)
    assert (failed.outcome, failed.entry().attempt, failed.entry().started_at) == (
        "failed",
        3,
        started,
    )
