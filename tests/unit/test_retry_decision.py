"""A task's retry policy, without a database: ``retry_on``, ``give_up_on``, ``should_retry``,
its own backoff and jitter, checked against a small model of the decision."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sqla_scheduler import (
    Execution,
    FixedDelay,
    TaskDefinitionError,
    custom,
    one_time,
    recurring,
)
from sqla_scheduler._error_text import error_text
from sqla_scheduler._runner import outcomes
from sqla_scheduler._runner.outcomes import Abandon
from sqla_scheduler._store import Completion
from tests.support.builders import RETRY_CONFIG, picked
from tests.support.clocks import NOW

CONFIG = RETRY_CONFIG
HOUR = timedelta(hours=1)


class Transient(Exception):
    """An error worth retrying."""


class Flaky(Transient):
    """A kind of ``Transient``."""


class Fatal(Exception):
    """An error not worth retrying."""


ERRORS: list[type[BaseException]] = [
    Transient,
    Flaky,
    Fatal,
    ValueError,
    KeyError,
    LookupError,
    TimeoutError,
    KeyboardInterrupt,
]


def noop(ctx: Any) -> None: ...


def execution(*, failures: int = 0, instance: str = "i") -> Execution:
    return picked(failures=failures, instance_id=instance)


# --- the model ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """What the model's ``should_retry`` does: return ``value``, or raise when it is
    ``RAISES``."""

    value: object


RAISES = object()
ANSWERS = st.sampled_from(
    [
        None,  # no should_retry
        Answer(True),
        Answer(False),
        Answer(timedelta(0)),
        Answer(timedelta(minutes=7)),
        Answer(timedelta(seconds=-1)),  # not a delay: the default rule
        Answer("yes"),  # not an answer: the default rule
        Answer(None),  # forgot to return: the default rule
        Answer(RAISES),
    ]
)
TYPE_SETS = st.lists(st.sampled_from(ERRORS), max_size=3, unique=True).map(tuple)


def model(
    error: type[BaseException],
    give_up_on: tuple[type[BaseException], ...],
    retry_on: tuple[type[BaseException], ...] | None,
    answer: Answer | None,
    failures: int,
    limit: int | None,
) -> tuple[str | None, timedelta]:
    """The rule that gives up (``None``: none) and the retry's delay, as the docs say."""
    backoff = min(timedelta(seconds=30) * 2 ** (failures - 1), HOUR)
    for t in give_up_on:
        if issubclass(error, t):
            return f"given up: give_up_on {t.__qualname__}", backoff
    if retry_on is not None and not issubclass(error, retry_on):
        return "not in retry_on", backoff
    delay = backoff
    if answer is not None:
        if answer.value is False:
            return "should_retry said no", backoff
        if isinstance(answer.value, timedelta) and answer.value >= timedelta(0):
            delay = answer.value
    if limit is not None and failures > limit:
        return f"retry limit {limit}", delay
    return None, delay


def should_retry_for(answer: Answer | None, calls: list[tuple[BaseException, int]]) -> Any:
    if answer is None:
        return None

    def should_retry(error: BaseException, attempt: int) -> Any:
        calls.append((error, attempt))
        if answer.value is RAISES:
            raise RuntimeError("the rule itself is broken")
        return answer.value

    return should_retry


@given(
    error=st.sampled_from(ERRORS),
    give_up_on=TYPE_SETS,
    retry_on=st.none() | TYPE_SETS,
    answer=ANSWERS,
    before=st.integers(min_value=0, max_value=4),
    limit=st.none() | st.integers(min_value=0, max_value=3),
)
def test_a_one_time_failure_comes_to_what_the_model_says(
    error: type[BaseException],
    give_up_on: tuple[type[BaseException], ...],
    retry_on: tuple[type[BaseException], ...] | None,
    answer: Answer | None,
    before: int,
    limit: int | None,
) -> None:
    calls: list[tuple[BaseException, int]] = []
    task = one_time(
        "job",
        max_retries=limit,
        give_up_on=give_up_on,
        retry_on=retry_on,
        should_retry=should_retry_for(answer, calls),
    )(noop)
    raised = error("boom")
    decision = outcomes.failed(
        outcomes.policy_of(task, execution(failures=before), CONFIG), raised, now=NOW
    )
    rule, delay = model(error, give_up_on, retry_on, answer, before + 1, limit)
    if rule is None:
        assert isinstance(decision, Completion)
        assert (decision.kind, decision.at, decision.failures) == ("fail", NOW + delay, before + 1)
        assert decision.error == error_text(raised), "the error as it is, no rule after it"
    else:
        assert isinstance(decision, Abandon)
        assert decision.failures == before + 1
        assert decision.error is raised
        assert decision.last_error is not None
        assert decision.last_error.endswith(f"\n({rule})")
    by_type = rule is not None and ("give_up_on" in rule or "retry_on" in rule)
    asked = answer is not None and not by_type
    assert calls == ([(raised, before + 1)] if asked else []), "asked after the types only"


@given(
    error=st.sampled_from(ERRORS),
    give_up_on=TYPE_SETS,
    retry_on=st.none() | TYPE_SETS,
    answer=ANSWERS,
    before=st.integers(min_value=0, max_value=12),
)
def test_a_recurring_task_is_never_abandoned_a_given_up_run_waits_for_the_next(
    error: type[BaseException],
    give_up_on: tuple[type[BaseException], ...],
    retry_on: tuple[type[BaseException], ...] | None,
    answer: Answer | None,
    before: int,
) -> None:
    task = recurring(
        "job",
        FixedDelay(HOUR),
        give_up_on=give_up_on,
        retry_on=retry_on,
        should_retry=should_retry_for(answer, []),
    )(noop)
    decision = outcomes.failed(
        outcomes.policy_of(task, execution(failures=before), CONFIG), error("x"), now=NOW
    )
    rule, delay = model(error, give_up_on, retry_on, answer, before + 1, None)
    assert isinstance(decision, Completion), "a recurring task is never abandoned"
    assert decision.failures == before + 1, "the failure is counted"
    assert decision.error is not None
    if rule is None:
        assert decision.at == NOW + min(delay, HOUR)
        assert not decision.error.endswith(")")
    else:
        assert decision.at == NOW + HOUR, "given up: its next regular run"
        assert decision.error.endswith(f"\n({rule})")


def test_what_should_retry_raises_is_logged_by_name_and_the_default_rule_decides(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def should_retry(error: BaseException, attempt: int) -> bool:
        raise SystemExit("not the loop's end")

    task = one_time("job", max_retries=1, should_retry=should_retry)(noop)
    with caplog.at_level(logging.ERROR, logger="sqla_scheduler"):
        retry = outcomes.failed(
            outcomes.policy_of(task, execution(), CONFIG), ValueError(), now=NOW
        )
    assert isinstance(retry, Completion)
    assert retry.at == NOW + timedelta(seconds=30)
    assert "task 'job': should_retry failed on attempt 1" in caplog.text
    assert "SystemExit: not the loop's end" in caplog.text
    spent = outcomes.failed(
        outcomes.policy_of(task, execution(failures=1), CONFIG), ValueError(), now=NOW
    )
    assert isinstance(spent, Abandon)
    assert spent.last_error is not None
    assert spent.last_error.endswith("\n(retry limit 1)")


def test_a_tasks_own_backoff_overrides_the_configs() -> None:
    task = custom(
        "job",
        retry_base_delay=timedelta(seconds=2),
        retry_backoff_rate=3,
        retry_max_delay=timedelta(seconds=20),
    )(noop)
    delays = [outcomes.retry_delay(task, execution(), failures, CONFIG) for failures in range(1, 5)]
    assert delays == [timedelta(seconds=s) for s in (2, 6, 18, 20)]
    rate_only = one_time("job", retry_backoff_rate=1.0)(noop)
    assert outcomes.retry_delay(rate_only, execution(), 9, CONFIG) == timedelta(seconds=30)
    slow = one_time("job", retry_base_delay=2 * HOUR)(noop)
    assert outcomes.retry_delay(slow, execution(), 1, CONFIG) == 2 * HOUR, "above the cap"
    capped = one_time("job", retry_max_delay=timedelta(seconds=5))(noop)
    assert outcomes.retry_delay(capped, execution(), 1, CONFIG) == timedelta(seconds=5)
    at_once = one_time("job", retry_base_delay=0)(noop)
    assert outcomes.retry_delay(at_once, execution(), 3, CONFIG) == timedelta(0)


@given(
    jitter=st.floats(min_value=0, max_value=1),
    failures=st.integers(min_value=1, max_value=30),
    instance=st.text(max_size=20),
)
def test_jitter_shortens_the_backoff_by_at_most_its_fraction_the_same_way_each_time(
    jitter: float, failures: int, instance: str
) -> None:
    plain = one_time("job")(noop)
    spread = one_time("job", retry_jitter=jitter)(noop)
    row = execution(instance=instance)
    full = outcomes.retry_delay(plain, row, failures, CONFIG)
    delay = outcomes.retry_delay(spread, row, failures, CONFIG)
    assert full * (1 - jitter) - timedelta(microseconds=1) <= delay <= full
    assert delay == outcomes.retry_delay(spread, row, failures, CONFIG), "deterministic"
    fraction = outcomes.jitter_fraction(row, failures)
    assert 0 <= fraction < 1
    assert delay == full * (1 - jitter * fraction)


def test_jitter_spreads_many_executions_failing_at_once() -> None:
    task = one_time("job", retry_jitter=0.5)(noop)
    delays = {outcomes.retry_delay(task, execution(instance=str(n)), 1, CONFIG) for n in range(100)}
    assert len(delays) > 90
    assert min(delays) < timedelta(seconds=20)
    assert max(delays) > timedelta(seconds=25)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retry_on": "ValueError"}, "retry_on must be an exception class or a tuple of them"),
        ({"retry_on": (ValueError, int)}, r"retry_on .* got \(<class 'ValueError'>, <class 'int'>"),
        ({"give_up_on": [ValueError, None]}, "give_up_on must be an exception class"),
        ({"should_retry": "no"}, "should_retry must be callable, got 'no'"),
        ({"should_retry": lambda error: True}, "should_retry .* must accept 2 positional"),
        ({"retry_jitter": -0.1}, "retry_jitter must be a fraction from 0 to 1, got -0.1"),
        ({"retry_jitter": 1.5}, "retry_jitter must be a fraction from 0 to 1, got 1.5"),
        ({"retry_jitter": True}, "retry_jitter must be a fraction from 0 to 1, got True"),
        ({"retry_backoff_rate": 0.5}, "retry_backoff_rate must be at least 1.0, got 0.5"),
        ({"retry_base_delay": -1}, "retry_base_delay is negative.*, got -1"),
        ({"retry_max_delay": "soon"}, "retry_max_delay .*, got 'soon'"),
        (
            {"retry_base_delay": timedelta(minutes=2), "retry_max_delay": timedelta(minutes=1)},
            "retry_max_delay must be at least retry_base_delay",
        ),
    ],
)
def test_bad_retry_options_are_refused_where_the_task_is_defined(
    options: dict[str, Any], message: str
) -> None:
    for define in (one_time, custom):
        with pytest.raises(TaskDefinitionError, match=rf"task 'job': {message}"):
            define("job", **options)(noop)
    with pytest.raises(TaskDefinitionError, match=rf"task 'job': {message}"):
        recurring("job", FixedDelay(HOUR), **options)(noop)


def test_an_async_should_retry_is_refused() -> None:
    async def should_retry(error: BaseException, attempt: int) -> bool:
        return True

    with pytest.raises(TaskDefinitionError, match="should_retry must be a plain function"):
        one_time("job", should_retry=should_retry)(noop)


def test_retry_options_are_read_and_kept() -> None:
    task = one_time(
        "job",
        retry_on=OSError,
        give_up_on=[PermissionError],
        retry_base_delay="10s",
        retry_max_delay=90,
        retry_jitter=1,
    )(noop)
    assert (task.retry_on, task.give_up_on) == ((OSError,), (PermissionError,))
    assert (task.retry_base_delay, task.retry_max_delay) == (
        timedelta(seconds=10),
        timedelta(seconds=90),
    )
    assert task.retry_jitter == 1
