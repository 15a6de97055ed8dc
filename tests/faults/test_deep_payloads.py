"""A payload nested deeper than decoding can go: refused where it is given, and, stored
anyway (by hand, by an older version), its row alone is undecodable, whatever decoding
raised (issue 29, defect 3: a payload 600 deep raised RecursionError in the upcast, and
its execution was revived forever)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text

from sqla_scheduler import ManualClock, NextAt, PayloadError, Scheduler, custom, one_time
from sqla_scheduler._payload import MAX_PAYLOAD_DEPTH
from tests.support import NOW, Harness

pytestmark = pytest.mark.anyio


def nested(depth: int) -> Any:
    """Lists and objects in turn, ``depth`` deep."""
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


ran: list[str] = []
v1 = one_time("versioned")(lambda ctx: None)
v2 = one_time("versioned", payload_version=2, upcasters={1: lambda data: data})(
    lambda ctx: ran.append(ctx.instance_id)
)
good = one_time("good")(lambda ctx: ran.append(ctx.instance_id))


def test_a_payload_nested_past_the_bound_is_refused_naming_task_and_bound() -> None:
    assert v2.instance("ok", nested(MAX_PAYLOAD_DEPTH)).data == nested(MAX_PAYLOAD_DEPTH)
    for depth in (MAX_PAYLOAD_DEPTH + 1, 600):
        with pytest.raises(PayloadError) as refused:
            v2.instance("deep", nested(depth))
        assert str(refused.value) == (
            f"task 'versioned': payload nests arrays and objects {depth} deep; "
            f"at most {MAX_PAYLOAD_DEPTH} are allowed"
        )
    returns = custom("again")(lambda ctx: None)
    with pytest.raises(PayloadError, match=r"task 'again': payload nests .* 600 deep"):
        returns.codec.encode(NextAt(NOW, nested(600)).payload)


async def test_a_payload_at_the_bound_is_upcast_and_run(sqlite: Harness) -> None:
    ran.clear()
    scheduler = Scheduler(sqlite.engine, [v2], clock=ManualClock(NOW))
    await sqlite.resolve(
        scheduler.schedule(sqlite.engine, v1.instance("at-bound", nested(MAX_PAYLOAD_DEPTH)))
    )
    assert await scheduler.run_due() == 1
    assert ran == ["at-bound"]


async def test_a_stored_payload_too_deep_to_decode_makes_its_row_undecodable(
    sqlite: Harness,
) -> None:
    ran.clear()
    scheduler = Scheduler(sqlite.engine, [v2, good], clock=ManualClock(NOW))
    await sqlite.resolve(
        scheduler.schedule_batch(sqlite.engine, [v1.instance("deep"), good.instance("g")])
    )
    deep = nested(600)
    with sqlite.sync_engine.begin() as conn:  # stored before the bound, or by hand
        conn.execute(
            text("update scheduled_tasks set task_data = :data where task_instance = 'deep'"),
            {"data": json.dumps(deep)},
        )
    try:
        assert await scheduler.run_due() == 2
    except BaseException as exc:  # not expected to end run_due: still a failure
        pytest.fail(f"run_due raised {exc!r}")
    assert ran == ["g"]
    assert sqlite.row("versioned", "deep") is None, "out of rotation, not left to revival"
    (entry,) = await sqlite.resolve(scheduler.history(sqlite.engine, task_name="versioned"))
    assert (entry.outcome, entry.instance_id, entry.payload_version) == ("undecodable", "deep", 1)
    assert entry.data == deep
    assert "RecursionError" in (entry.error or "")
    assert await scheduler.run_due() == 0
