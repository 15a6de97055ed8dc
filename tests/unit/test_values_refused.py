"""Values no supported database can store exactly are refused before any statement runs,
naming the task and the field (issue 13, defects 2, 5 and 10; issue 29, defects 5, 6, 8
and 11). No database needed."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from sqla_scheduler import (
    FixedRate,
    InvalidScheduleError,
    NextAt,
    PayloadError,
    TaskDefinitionError,
    TaskInstance,
    one_time,
    recurring,
)
from sqla_scheduler.executions import list_executions
from sqla_scheduler.history import list_history, requeue
from sqla_scheduler.results import read_result, wait_for_result

job = one_time("job")(lambda ctx: None)
URL = "sqlite:////nonexistent-directory/app.db"
EAST = timezone(timedelta(hours=5))
WEST = timezone(timedelta(hours=-5))


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"note": "a\x00b"}, r"payload\['note'\] contains a NUL character"),
        ({"a\x00": 1}, r"payload key 'a\\x00' contains a NUL character"),
        ([1, ["\ud800"]], r"payload\[1\]\[0\] contains a lone surrogate"),
        ("\udfff", "payload contains a lone surrogate"),
    ],
)
def test_strings_postgresql_cannot_store_are_refused(payload: Any, message: str) -> None:
    with pytest.raises(PayloadError, match=r"task 'job': " + message):
        job.instance("i", payload)


def test_text_that_only_looks_like_an_escape_is_kept() -> None:
    payload = {"raw": "\\u0000 and \\ud800", "emoji": "\U0001f600"}
    assert job.instance("i", payload).data == payload


def test_a_payload_nested_too_deeply_is_refused() -> None:
    deep: Any = 0
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(PayloadError, match="task 'job': payload is nested too deeply"):
        job.instance("i", deep)


def test_a_recurring_task_checks_its_initial_payload() -> None:
    with pytest.raises(PayloadError, match="NUL"):
        recurring("tick", "FIXED_DELAY|1h", initial_payload={"x": "\x00"})(lambda ctx: None)


@pytest.mark.parametrize(
    "at",
    [
        datetime(1, 1, 1, 2, tzinfo=EAST),
        datetime(1, 1, 1, 23, tzinfo=timezone.utc),
        datetime(9999, 12, 31, 0, tzinfo=timezone.utc),
        datetime(9999, 12, 31, 22, tzinfo=WEST),
    ],
    ids=["before-year-1", "first-day", "last-day", "after-9999"],
)
def test_times_outside_what_every_database_reads_back_are_refused(at: datetime) -> None:
    """Years 1-9999 less a day at each end: PostgreSQL hands a timestamp back in the
    session's time zone, and a day either way covers every zone."""
    outside = "outside 0001-01-02 to 9999-12-30 UTC"
    with pytest.raises(TaskDefinitionError, match=rf"task 'job': at .* {outside}"):
        job.instance("i", at=at)
    with pytest.raises(TaskDefinitionError, match=rf"NextAt\.at .* {outside}"):
        NextAt(at)


def test_the_last_representable_times_are_accepted() -> None:
    assert job.instance("i", at=datetime(1, 1, 1, 19, tzinfo=WEST)).execution_time is not None
    assert job.instance("j", at=datetime(9999, 12, 30, 23, 59, 59, 999999, tzinfo=timezone.utc))


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"execution_time": datetime(2030, 1, 1)}, TaskDefinitionError, "timezone-aware"),
        ({"instance_id": "x" * 256}, TaskDefinitionError, "instance id .* limit is 255"),
        ({"task_name": ""}, TaskDefinitionError, "task name must not be empty"),
        ({"priority": 40_000}, TaskDefinitionError, "priority must be an int"),
        ({"data": {"k": "\x00"}}, PayloadError, "NUL"),
        ({"data": (1, 2)}, None, None),
    ],
)
def test_a_task_instance_built_directly_is_checked(
    fields: dict[str, Any], error: type[Exception] | None, message: str | None
) -> None:
    values: dict[str, Any] = {
        "task_name": "job",
        "instance_id": "i",
        "data": None,
        "execution_time": None,
        "priority": 0,
        **fields,
    }
    if error is None:
        assert TaskInstance(**values).data == [1, 2], "stored as the database gives it back"
        return
    with pytest.raises(error, match=message):
        TaskInstance(**values)


@pytest.mark.parametrize("every", [1e20, 10**30, timedelta(days=999_999_000)])
def test_intervals_past_100_years_are_refused(every: Any) -> None:
    with pytest.raises(InvalidScheduleError, match=r"FixedRate\.every must be at most 36525 days"):
        FixedRate(every)


# --- issue 29: bounds on a task's numbers, control characters in names, and the one-off
# functions' numbers and keys, refused before anything connects ----------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_retries": 1_000_001}, "max_retries must be an int from 0 to 1000000 or None"),
        ({"max_retries": 2**63}, "max_retries must be an int from 0 to 1000000 or None"),
        ({"max_concurrency": 10**6 + 1}, "max_concurrency must be an int from 1 to 1000000"),
        ({"max_concurrency": 0}, "max_concurrency must be an int from 1 to 1000000"),
        ({"priority": 2**15}, "priority must be an int from -32768 to 32767"),
        ({"timeout": 1e20}, "timeout must be more than 0 and at most 100 years"),
        ({"timeout": float("nan")}, "timeout must be more than 0 and at most 100 years"),
    ],
)
def test_a_tasks_numbers_are_bounded(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(TaskDefinitionError, match=f"^task 'job': {message}"):
        one_time("job", **fields)(lambda ctx: None)


def test_a_tasks_bounds_themselves_are_accepted() -> None:
    task = one_time("job", max_retries=1_000_000, max_concurrency=1_000_000, priority=-32768)
    assert task(lambda ctx: None).max_retries == 1_000_000


@pytest.mark.parametrize("name", ["a\nb", "a\tb", "job\x1b[31m", "a\x7fb", "a\x85b", "\x01"])
def test_control_characters_in_a_task_name_are_refused(name: str) -> None:
    with pytest.raises(TaskDefinitionError, match="contains a control character"):
        one_time(name)(lambda ctx: None)
    with pytest.raises(TaskDefinitionError, match="contains a control character"):
        recurring(name, "FIXED_DELAY|1h")(lambda ctx: None)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: list_history(URL, limit=2**63), "limit must be an int from 0 to"),
        (lambda: list_history(URL, task_name="a\x00"), "task_name 'a\\\\x00' contains a NUL"),
        (lambda: list_history(URL, instance_id="\ud800"), "instance_id '\\\\ud800' contains"),
        (lambda: requeue(URL, 2**63), "history_id must be an int from 1 to"),
        (lambda: requeue(URL, -1), "history_id must be an int from 1 to"),
        (lambda: list_executions(URL, limit=2**63), "limit must be an int from 0 to"),
        (lambda: list_executions(URL, offset=-1), "offset must be an int from 0 to"),
        (lambda: list_executions(URL, task_name="\ud800"), "task_name '\\\\ud800' contains"),
        (lambda: read_result(URL, "t", "a\x00"), "task 't': instance id 'a\\\\x00' contains a"),
        (lambda: read_result(URL, "\ud800", "i"), "task name '\\\\ud800' contains a lone"),
        (lambda: wait_for_result(URL, "t", "i", timeout=-1), "timeout must be zero or more"),
        (lambda: wait_for_result(URL, "t", "\x00", timeout=1), "instance id '\\\\x00' contains"),
    ],
)
def test_the_one_off_functions_check_before_connecting(call: Any, message: str) -> None:
    """``URL`` names no database: a refusal, not ``MissingTableError``, says the check
    came first."""
    with pytest.raises((ValueError, TaskDefinitionError), match=message):
        call()
