"""Payload versions without a database: what the decorators accept and refuse, and how a
task's codec brings a stored payload of an earlier version up to its own."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from sqla_scheduler import (
    Execution,
    FixedDelay,
    NextAt,
    SchedulerConfig,
    TaskInstance,
    custom,
    one_time,
    recurring,
)
from sqla_scheduler._runner import outcomes
from sqla_scheduler.exceptions import PayloadError, TaskDefinitionError
from sqla_scheduler.testing import build_context
from tests.support.builders import execution_at

NOW = datetime(2030, 1, 1, tzinfo=timezone.utc)


@dataclasses.dataclass
class Resize:
    """Version 3 of a payload: ``path`` (v1) became ``source`` (v2), then ``width`` came."""

    source: str
    width: int


def to_v2(data: dict[str, Any]) -> dict[str, Any]:
    return {"source": data["path"]}


def to_v3(data: dict[str, Any]) -> dict[str, Any]:
    return {**data, "width": 640}


UPCASTERS = {1: to_v2, 2: to_v3}


def handler(ctx: Any) -> None:
    pass


DECORATORS = [
    pytest.param(lambda **kw: one_time("t", **kw), id="one_time"),
    pytest.param(lambda **kw: custom("t", **kw), id="custom"),
    pytest.param(
        lambda **kw: recurring("t", FixedDelay(timedelta(minutes=1)), **kw), id="recurring"
    ),
]


@pytest.mark.parametrize("decorate", DECORATORS)
def test_every_kind_is_at_version_1_by_default(decorate: Any) -> None:
    task = decorate()(handler)
    assert (task.payload_version, dict(task.upcasters)) == (1, {})
    assert task.codec.decode({"a": 1}, 1) == {"a": 1}


@pytest.mark.parametrize("decorate", DECORATORS)
def test_every_kind_takes_a_version_and_its_upcasters(decorate: Any) -> None:
    given = dict(UPCASTERS)
    task = decorate(payload_type=Resize, payload_version=3, upcasters=given)(handler)
    given.clear()  # the task keeps a mapping of its own
    assert task.payload_version == 3
    assert dict(task.upcasters) == UPCASTERS
    assert task.codec.decode({"path": "a.png"}, 1) == Resize("a.png", 640)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"payload_version": 0}, "payload_version must be an int from 1 to 32767, got 0"),
        ({"payload_version": -2}, "payload_version must be an int from 1 to 32767, got -2"),
        ({"payload_version": 32768}, "payload_version must be an int from 1 to 32767, got 32768"),
        ({"payload_version": True}, "payload_version must be an int from 1 to 32767, got True"),
        ({"payload_version": "2"}, "payload_version must be an int from 1 to 32767, got '2'"),
        ({"payload_version": 2.0}, "payload_version must be an int from 1 to 32767, got 2.0"),
        (
            {"payload_version": 3},
            "payload_version=3 needs an upcaster for each earlier version; "
            "upcasters has none for 1, 2",
        ),
        (
            {"payload_version": 3, "upcasters": {1: to_v2}},
            "payload_version=3 needs an upcaster for each earlier version; "
            "upcasters has none for 2",
        ),
        (
            {"payload_version": 3, "upcasters": {**UPCASTERS, 3: to_v3}},
            "upcasters has a key 3; with payload_version=3 its keys are the earlier versions, "
            "ints from 1 to 2",
        ),
        (
            {"upcasters": {1: to_v2}},
            "upcasters has a key 1; with payload_version=1 its keys are the earlier versions",
        ),
        (
            {"payload_version": 2, "upcasters": {0: to_v2, 1: to_v2}},
            "upcasters has a key 0",
        ),
        (
            {"payload_version": 2, "upcasters": {"1": to_v2}},
            "upcasters has a key '1'",
        ),
        (
            {"payload_version": 2, "upcasters": {1: "to_v2"}},
            "upcasters[1] must be callable, got 'to_v2'",
        ),
        (
            {"payload_version": 2, "upcasters": {1: lambda a, b: a}},
            "upcasters[1] <function <lambda>",
        ),
        (
            {"payload_version": 2, "upcasters": [to_v2]},
            "upcasters must be a mapping of versions to callables",
        ),
    ],
)
@pytest.mark.parametrize("decorate", DECORATORS)
def test_a_bad_version_or_upcaster_fails_where_the_task_is_defined(
    decorate: Any, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(TaskDefinitionError) as raised:
        decorate(**fields)(handler)
    assert str(raised.value).startswith("task 't': ")
    assert message in str(raised.value)


def test_what_a_task_makes_carries_its_version() -> None:
    job = one_time("job", payload_version=3, upcasters=UPCASTERS)(handler)
    assert job.instance("i", {"source": "a", "width": 1}).payload_version == 3
    tick = recurring(
        "tick", FixedDelay(timedelta(minutes=1)), payload_version=2, upcasters={1: to_v2}
    )(handler)
    first = tick.first_instance(NOW)
    assert first is not None
    assert first.payload_version == 2
    per_tenant = recurring("per-tenant", payload_version=2, upcasters={1: to_v2})(handler)
    assert per_tenant.instance("acme", schedule="FIXED_DELAY|1m").payload_version == 2


@pytest.mark.parametrize("version", [0, 32768, None, "1"])
def test_an_instance_of_an_impossible_version_is_refused(version: Any) -> None:
    with pytest.raises(TaskDefinitionError, match=r"task 'job': payload_version must be an int"):
        TaskInstance(
            task_name="job",
            instance_id="i",
            data=None,
            execution_time=None,
            priority=0,
            payload_version=version,
        )


def _versioned(**kw: Any) -> Any:
    return one_time("resize", payload_type=Resize, payload_version=3, upcasters=UPCASTERS, **kw)(
        handler
    )


def test_each_earlier_version_is_brought_up_one_step_at_a_time() -> None:
    codec = _versioned().codec
    assert codec.decode({"path": "a.png"}, 1) == Resize("a.png", 640)
    assert codec.decode({"source": "b.png"}, 2) == Resize("b.png", 640)
    assert codec.decode({"source": "c.png", "width": 10}, 3) == Resize("c.png", 10)
    assert codec.decode({"source": "c.png", "width": 10}) == Resize("c.png", 10)  # its own


def test_a_payload_of_the_current_version_is_not_upcast() -> None:
    calls: list[int] = []

    def counted(step: int) -> Any:
        return lambda data: calls.append(step) or data

    task = one_time("t", payload_version=3, upcasters={1: counted(1), 2: counted(2)})(handler)
    assert task.codec.decode({"x": 1}, 3) == {"x": 1}
    assert calls == []
    assert task.codec.decode({"x": 1}, 2) == {"x": 1}
    assert calls == [2]


def test_without_a_payload_type_the_upcast_json_is_the_payload() -> None:
    task = one_time("t", payload_version=3, upcasters=UPCASTERS)(handler)
    assert task.codec.decode({"path": "a.png"}, 1) == {"source": "a.png", "width": 640}


def test_upcasters_work_on_a_copy_of_the_stored_payload() -> None:
    def in_place(data: dict[str, Any]) -> dict[str, Any]:
        data["source"] = data.pop("path")
        return data

    task = one_time("t", payload_version=2, upcasters={1: in_place})(handler)
    stored = {"path": "a.png"}
    assert task.codec.decode(stored, 1) == {"source": "a.png"}
    assert stored == {"path": "a.png"}  # what the row keeps if the handler returns nothing


@pytest.mark.parametrize("version", [0, -1, 4, 32767])
def test_a_payload_of_an_unknown_version_does_not_decode(version: int) -> None:
    with pytest.raises(PayloadError) as raised:
        _versioned().codec.decode({"source": "a", "width": 1}, version)
    assert str(raised.value) == (
        f"task 'resize': stored payload has version {version}; this task reads versions "
        "1 to 3 (payload_version=3)"
    )


def test_a_failing_upcaster_or_an_upcast_payload_that_does_not_fit_does_not_decode() -> None:
    codec = _versioned().codec
    with pytest.raises(PayloadError) as raised:
        codec.decode({"name": "a.png"}, 1)  # to_v2 looks for "path"
    assert str(raised.value) == (
        "task 'resize': upcasters[1] (version 1 to 2) failed on a stored version-1 payload: "
        "KeyError: 'path'"
    )
    assert isinstance(raised.value.__cause__, KeyError)
    with pytest.raises(PayloadError, match="does not decode as Resize"):
        codec.decode({"source": "a.png", "height": 3}, 3)


def test_build_context_decodes_at_the_tasks_own_version() -> None:
    ctx = build_context(_versioned(), Resize("a.png", 10))
    assert ctx.payload == Resize("a.png", 10)


def _execution(payload_version: int) -> Execution:
    return execution_at(
        NOW,
        task_name="t",
        instance_id="i",
        data={"path": "a.png"},
        picked=True,
        picked_by="me",
        last_heartbeat=NOW,
        payload_version=payload_version,
    )


def test_a_new_payload_is_written_at_the_tasks_version_and_a_kept_one_keeps_its_own() -> None:
    tick = recurring("t", FixedDelay(timedelta(minutes=1)), payload_version=3, upcasters=UPCASTERS)(
        handler
    )
    ticked = outcomes.policy_of(tick, _execution(1), SchedulerConfig())
    kept = outcomes.succeeded(ticked, None, now=NOW)
    assert (kept.data, kept.payload_version) == ({"path": "a.png"}, None)  # the row's own
    new = outcomes.succeeded(ticked, {"source": "b", "width": 2}, now=NOW)
    assert (new.data, new.payload_version) == ({"source": "b", "width": 2}, 3)

    poll = custom("t", payload_version=3, upcasters=UPCASTERS)(handler)
    later = NOW + timedelta(minutes=1)
    polled = outcomes.policy_of(poll, _execution(2), SchedulerConfig())
    kept = outcomes.succeeded(polled, NextAt(later), now=NOW)
    assert (kept.data, kept.payload_version) == ({"path": "a.png"}, None)
    new = outcomes.succeeded(polled, NextAt(later, {"source": "c"}), now=NOW)
    assert (new.data, new.payload_version) == ({"source": "c"}, 3)
