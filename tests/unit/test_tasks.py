"""Task definitions: what each decorator builds and every error it raises."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from typing import Any

import pydantic
import pytest

from sqla_scheduler import (
    Cron,
    CustomTask,
    FixedDelay,
    Group,
    NextAt,
    OneTimeTask,
    RateLimit,
    RecurringTask,
    Result,
    custom,
    one_time,
    recurring,
)
from sqla_scheduler.exceptions import InvalidScheduleError, PayloadError, TaskDefinitionError
from sqla_scheduler.testing import build_context

NOW = datetime(2030, 1, 1, tzinfo=timezone.utc)


def handler(ctx: Any) -> None:
    pass


async def async_handler(ctx: Any) -> None:
    pass


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Order(pydantic.BaseModel):
    id: int
    items: list[str]


def test_decorators_build_each_kind() -> None:
    sweep = recurring("sweep", Cron("0 * * ? * *"), priority=3)(handler)
    email = one_time("email", max_retries=2)(async_handler)
    poll = custom("poll")(handler)
    assert isinstance(sweep, RecurringTask)
    assert sweep.kind == "recurring"
    assert isinstance(email, OneTimeTask)
    assert email.kind == "one_time"
    assert isinstance(poll, CustomTask)
    assert poll.kind == "custom"
    assert (sweep.is_async, email.is_async, poll.is_async) == (False, True, False)
    assert sweep.priority == 3
    assert email.max_retries == 2


@pytest.mark.parametrize(
    ("decorator", "option"),
    [
        (recurring, "max_retries"),  # a RecurringTask has the field; the decorator refuses it
        (recurring, "on_abandon"),
        (recurring, "keep_result"),
        (one_time, "schedule"),
        (one_time, "initial_payload"),
        (custom, "retries"),
    ],
)
def test_a_decorator_refuses_an_option_it_does_not_take_when_called(
    decorator: Any, option: str
) -> None:
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{option}'"):
        decorator("job", **{option: 1})


def test_upcasters_none_is_no_upcaster() -> None:
    task = one_time("email", upcasters=None)(handler)
    assert task.upcasters == {}


def test_recurring_accepts_the_text_form_of_a_schedule() -> None:
    task = recurring("sweep", "FIXED_DELAY|30s")(handler)
    assert task.schedule == FixedDelay(timedelta(seconds=30))


def test_recurring_first_instance() -> None:
    task = recurring("sweep", FixedDelay(timedelta(minutes=1)), initial_payload={"n": 0})(handler)
    first = task.first_instance(NOW)
    assert first is not None
    assert (first.instance_id, first.data, first.execution_time, first.schedule) == (
        "recurring",
        {"n": 0},
        NOW,
        "FIXED_DELAY|1m",
    )
    assert recurring("off", "-")(handler).first_instance(NOW) is None


def test_instance_defaults_and_overrides() -> None:
    task = one_time("email", priority=4)(handler)
    plain = task.instance("a")
    assert (plain.task_name, plain.instance_id, plain.data, plain.execution_time) == (
        "email",
        "a",
        None,
        None,
    )
    assert plain.priority == 4
    later = task.instance("b", {"k": (1, 2)}, at=NOW, priority=-7)
    assert later.data == {"k": [1, 2]}  # stored as the database would give it back
    assert (later.execution_time, later.priority) == (NOW, -7)
    assert task.instance("b", {"k": (1, 2)}, NOW, -7) == later  # as SPEC writes it


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("", "must not be empty"),
        (" padded", "white space"),
        ("x" * 101, "101 characters long; the limit is 100"),
        ("nul\x00byte", "NUL"),
        ("bad\ud800surrogate", "not valid Unicode"),
        (42, "must be a str, got 42"),
    ],
)
def test_bad_task_names(name: Any, fragment: str) -> None:
    with pytest.raises(TaskDefinitionError, match=fragment):
        one_time(name)(handler)


@pytest.mark.parametrize(
    ("instance_id", "fragment"),
    [
        ("", "instance id must not be empty"),
        ("i" * 256, "256 characters long; the limit is 255"),
        ("a\x00b", "NUL"),
        ("\udcff", "not valid Unicode"),
        (None, "must be a str, got None"),
    ],
)
def test_bad_instance_ids_name_the_task(instance_id: Any, fragment: str) -> None:
    task = one_time("email")(handler)
    with pytest.raises(TaskDefinitionError, match=fragment) as info:
        task.instance(instance_id)
    assert "'email'" in str(info.value)


@pytest.mark.parametrize("priority", [32768, -32769, 1.5, True, "1"])
def test_priority_outside_smallint(priority: Any) -> None:
    with pytest.raises(TaskDefinitionError, match=r"task 'p': priority must be an int") as info:
        one_time("p", priority=priority)(handler)
    assert repr(priority) in str(info.value)
    task = one_time("q")(handler)
    with pytest.raises(TaskDefinitionError, match="priority"):
        task.instance("x", priority=priority)


@pytest.mark.parametrize("max_retries", [-1, 1.0, True, "3"])
def test_bad_max_retries(max_retries: Any) -> None:
    with pytest.raises(TaskDefinitionError, match=r"task 'm': max_retries") as info:
        one_time("m", max_retries=max_retries)(handler)
    assert repr(max_retries) in str(info.value)


def test_handler_must_take_one_argument() -> None:
    with pytest.raises(TaskDefinitionError, match=r"task 'h': handler .* 1 positional"):
        one_time("h")(lambda: None)
    with pytest.raises(TaskDefinitionError, match=r"task 'h': handler must be callable"):
        one_time("h")(42)  # type: ignore[arg-type]


def test_on_abandon_must_take_context_and_session() -> None:
    with pytest.raises(TaskDefinitionError, match=r"task 'a': on_abandon .* 2 positional"):
        one_time("a", on_abandon=lambda ctx: None)(handler)
    one_time("a", on_abandon=lambda ctx, session: None)(handler)


@pytest.mark.parametrize(
    ("schedule", "fragment"),
    [
        ("CRON|61 * * * *", "61 \\* \\* \\* \\*"),
        ("FIXED_DELAY|-5s", "-5s"),
        ("NOPE|1s", "NOPE"),
    ],
)
def test_invalid_schedules_name_the_task(schedule: str, fragment: str) -> None:
    with pytest.raises(InvalidScheduleError, match=fragment) as info:
        recurring("cron-task", schedule)(handler)
    assert "'cron-task'" in str(info.value)


def test_invalid_cron_object_fails_where_it_is_written() -> None:
    with pytest.raises(InvalidScheduleError, match="61"):
        Cron("61 * * * *")


def test_unserializable_payloads_fail_at_the_call_site() -> None:
    task = one_time("email")(handler)
    with pytest.raises(PayloadError, match=r"task 'email': payload .*object.* not JSON"):
        task.instance("x", {"when": object()})
    with pytest.raises(PayloadError, match="not JSON"):
        task.instance("x", float("nan"))
    with pytest.raises(PayloadError, match=r"task 'sweep'"):
        recurring("sweep", "FIXED_DELAY|1s", initial_payload={1j})(handler)


def test_typed_payloads_are_checked_and_round_trip() -> None:
    points = one_time("points", payload_type=Point)(handler)
    orders = one_time("orders", payload_type=Order)(handler)
    assert points.instance("p", Point(1, 2)).data == {"x": 1, "y": 2}
    assert orders.instance("o", Order(id=1, items=["a"])).data == {"id": 1, "items": ["a"]}
    with pytest.raises(PayloadError, match=r"task 'points': payload \{'x': 1\} is not a Point"):
        points.instance("p", {"x": 1})  # type: ignore[arg-type]
    assert points.codec.decode({"x": 3, "y": 4}) == Point(3, 4)
    with pytest.raises(PayloadError, match=r"stored payload .* does not decode as Order"):
        orders.codec.decode({"id": "not-a-number"})


def test_build_context_round_trips_the_payload() -> None:
    seen: list[Point] = []
    task = one_time("points", payload_type=Point)(lambda ctx: seen.append(ctx.payload))
    ctx = build_context(task, Point(5, 6), consecutive_failures=2, last_error="OSError: x")
    task(ctx)
    assert seen == [Point(5, 6)]
    assert (ctx.task_name, ctx.instance_id, ctx.consecutive_failures) == ("points", "test", 2)
    assert ctx.last_error == "OSError: x"
    assert build_context(task, Point(0, 0)).last_error is None
    ctx.schedule(task.instance("next", Point(0, 0)))
    assert [i.instance_id for i in ctx.scheduled] == ["next"]


def test_build_context_takes_a_group_or_its_members_results() -> None:
    callback = one_time("report")(handler)
    assert build_context(callback).group is None
    group = Group(id=7, task_name="report", instance_id="r", total=2, remaining=1, created_at=NOW)
    assert build_context(callback, group=group).group is group
    done = Result(
        task_name="member",
        instance_id="m1",
        outcome="succeeded",
        value={"n": 1},
        error=None,
        finished_at=NOW,
    )
    built = build_context(callback, instance_id="r", execution_time=NOW, group=[done]).group
    assert built is not None
    assert (built.instance_id, built.total, built.remaining, built.finished_at) == ("r", 1, 0, NOW)
    assert (dict(built.outcomes), built.members) == ({"succeeded": 1}, (done,))
    with pytest.raises(
        TypeError, match=r"a Group or a sequence of Result, got an item of type str"
    ):
        build_context(callback, group="m1")  # type: ignore[arg-type]


def test_next_at_needs_an_aware_time() -> None:
    assert NextAt(NOW, {"a": 1}).payload == {"a": 1}
    with pytest.raises(TaskDefinitionError, match=r"NextAt\.at must be timezone-aware"):
        NextAt(datetime(2030, 1, 1))


def test_instance_at_needs_an_aware_time() -> None:
    task = one_time("email")(handler)
    with pytest.raises(TaskDefinitionError, match=r"task 'email': at must be timezone-aware"):
        task.instance("x", at=datetime(2030, 1, 1))


@pytest.mark.parametrize(
    ("text", "count", "per"),
    [
        ("5/s", 5, timedelta(seconds=1)),
        ("100/m", 100, timedelta(minutes=1)),
        ("1000/h", 1000, timedelta(hours=1)),
        ("20000/d", 20000, timedelta(days=1)),
        (" 100/5m ", 100, timedelta(minutes=5)),
        ("1/7d", 1, timedelta(days=7)),
        ("1000000/s", 1_000_000, timedelta(seconds=1)),
    ],
)
def test_rate_limits_read_from_text(text: str, count: int, per: timedelta) -> None:
    assert RateLimit.parse(text) == RateLimit(count, per=per)
    for decorator in (one_time("job", rate_limit=text), custom("job", rate_limit=text)):
        assert decorator(handler).rate_limit == RateLimit(count, per=per)
    assert recurring("tick", "FIXED_DELAY|1m", rate_limit=text)(handler).rate_limit == RateLimit(
        count, per=per
    )


def test_rate_limit_objects_are_taken_as_they_are() -> None:
    limit = RateLimit(3, per=timedelta(seconds=90))
    assert one_time("job", rate_limit=limit)(handler).rate_limit is limit
    assert one_time("job")(handler).rate_limit is None


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("0/s", r"count must be an int from 1 to 1,000,000, got 0 \(in '0/s'\)"),
        ("1000001/s", "count must be an int from 1 to 1,000,000"),
        ("5/0s", "window must be from 1 second to 7 days, got '5/0s'"),
        ("5/8d", "window must be from 1 second to 7 days"),
        ("5/100000000000000d", "window must be from 1 second to 7 days"),
        ("5/ms", "written COUNT/UNIT"),
        ("5 per second", "written COUNT/UNIT"),
        ("1.5/s", "written COUNT/UNIT"),
        ("-1/s", "written COUNT/UNIT"),
        ("５/s", "written COUNT/UNIT"),  # noqa: RUF001 - a full-width digit is refused
        ("", "written COUNT/UNIT"),
        (5, " must be a RateLimit or text such as '100/m', got 5"),
        (timedelta(seconds=1), " must be a RateLimit or text"),
    ],
)
def test_bad_rate_limits_name_the_task_field_and_value(value: Any, fragment: str) -> None:
    with pytest.raises(TaskDefinitionError, match=rf"task 'job': rate_limit.*{fragment}"):
        one_time("job", rate_limit=value)(handler)


@pytest.mark.parametrize(
    ("count", "per", "fragment"),
    [
        (0, timedelta(seconds=1), "count must be an int from 1 to 1,000,000, got 0"),
        (True, timedelta(seconds=1), "count must be an int"),
        (2.0, timedelta(seconds=1), "count must be an int"),
        (5, timedelta(milliseconds=999), "per must be a timedelta from 1 second to 7 days"),
        (5, timedelta(days=7, seconds=1), "per must be a timedelta from 1 second to 7 days"),
        (5, 60, "per must be a timedelta"),
    ],
)
def test_bad_rate_limit_objects(count: Any, per: Any, fragment: str) -> None:
    with pytest.raises(TaskDefinitionError, match=fragment):
        RateLimit(count, per=per)
