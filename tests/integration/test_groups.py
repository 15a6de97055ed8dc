"""Groups and chains: members and callback scheduled together in the caller's
transaction; the callback due exactly once, when every member has finished, seeing each
member's outcome and result; a chain runs link after link; cancelling a group cancels
what has not started."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from sqla_scheduler import Group, ManualClock, custom, one_time, recurring
from sqla_scheduler._execution import WAITING
from sqla_scheduler.testing import build_context
from tests.support import NOW, Harness

# what this module tests runs in the scheduler's own units of work, the same statements
# through run_sync as with a sync engine, and every async driver is run by the other
# modules: on SQLite and MariaDB the sync cases carry the database's differences
pytestmark = [pytest.mark.anyio, pytest.mark.databases(async_on=["postgresql"])]


class Seen:
    """What the callbacks saw, in the order they ran."""

    def __init__(self) -> None:
        self.groups: list[Group | None] = []
        self.order: list[str] = []


def _tasks(seen: Seen) -> tuple[Any, Any, Any]:
    def work(ctx: Any) -> Any:
        seen.order.append(ctx.instance_id)
        if ctx.payload == "fail":
            raise RuntimeError(f"{ctx.instance_id} failed")
        return {"square": ctx.payload * ctx.payload}

    def done(ctx: Any) -> str:
        seen.order.append(ctx.instance_id)
        seen.groups.append(ctx.group)
        return "sent"

    member = one_time("member", max_retries=1)(work)
    callback = one_time("callback", keep_result=True)(done)
    step = one_time("step")(lambda ctx: seen.order.append(ctx.instance_id))
    return member, callback, step


async def _run_all(scheduler: Any, clock: ManualClock, rounds: int = 6) -> int:
    """Run what is due, round after round (a retry 30 s later included)."""
    ran = 0
    for _ in range(rounds):
        ran += await scheduler.run_due()
        clock.advance(timedelta(minutes=1))
    return ran


async def test_the_callback_runs_once_every_member_has_finished_and_sees_them(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    member, callback, _ = _tasks(seen)
    scheduler = db.scheduler([member, callback], clock)
    members = [member.instance(f"m{n}", n) for n in (1, 2, 3)]
    async with db.session() as session:
        group = await db.resolve(
            scheduler.schedule_group(session, members, then=callback.instance("report"))
        )
        await db.commit(session)
    assert (group.total, group.remaining, group.task_name, group.instance_id) == (
        3,
        3,
        "callback",
        "report",
    )
    row = db.row("callback", "report")
    assert row is not None
    assert (row["execution_time"], row["awaits"]) == (WAITING, group.id)
    assert db.row("member", "m1")["group_id"] == group.id  # type: ignore[index]

    # the members, then the callback the last member's finish made due
    assert await scheduler.run_due() == 4
    assert sorted(seen.order[:3]) == ["m1", "m2", "m3"]
    assert seen.order[3:] == ["report"]
    assert await scheduler.run_due() == 0

    (seen_group,) = seen.groups
    assert seen_group is not None
    assert seen_group.id == group.id
    assert (seen_group.total, seen_group.remaining, seen_group.finished) == (3, 0, True)
    assert dict(seen_group.outcomes) == {"succeeded": 3}
    values = {m.instance_id: m.value for m in seen_group.members}
    assert values == {"m1": {"square": 1}, "m2": {"square": 4}, "m3": {"square": 9}}
    progress = await db.resolve(scheduler.group(db.engine, group.id))
    assert progress.finished_at == NOW
    assert dict(progress.outcomes) == {"succeeded": 3}
    result = await db.resolve(scheduler.result(db.engine, "callback", "report"))
    assert result.value == "sent"


async def test_build_context_gives_a_callback_the_group_the_scheduler_gives_it(
    db: Harness, clock: ManualClock
) -> None:
    """``build_context(callback, group=results)``, from the members' results, is the
    ``ctx.group`` the scheduler hands the callback: counts, outcomes and members."""
    seen = Seen()
    member, callback, _ = _tasks(seen)
    scheduler = db.scheduler([member, callback], clock)
    members = [member.instance("m1", 1), member.instance("m2", "fail"), member.instance("m3", 3)]
    async with db.session() as session:
        await db.resolve(
            scheduler.schedule_group(session, members, then=callback.instance("report"))
        )
        await db.commit(session)
    await _run_all(scheduler, clock)
    (real,) = seen.groups
    assert real is not None
    assert dict(real.outcomes) == {"succeeded": 2, "abandoned": 1}

    built = build_context(callback, instance_id="report", group=real.members).group
    assert built is not None

    def shown(group: Group) -> tuple[Any, ...]:
        counts = (group.total, group.remaining, group.done, group.finished)
        return (group.task_name, group.instance_id, counts, dict(group.outcomes), group.members)

    assert shown(built) == shown(real)


async def test_a_member_being_retried_has_not_finished_and_an_abandoned_one_has(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    member, callback, _ = _tasks(seen)
    scheduler = db.scheduler([member, callback], clock, retry_base_delay=timedelta(seconds=30))
    members = [member.instance("ok", 2), member.instance("bad", "fail")]
    group = await db.resolve(
        scheduler.schedule_group(db.engine, members, then=callback.instance("after"))
    )
    assert await scheduler.run_due() == 2
    progress = await db.resolve(scheduler.group(db.engine, group.id))
    assert (progress.remaining, dict(progress.outcomes)) == (1, {"succeeded": 1})
    assert "after" not in seen.order
    clock.advance(timedelta(seconds=31))
    # the retry fails too (max_retries=1 abandons it), then the callback runs
    assert await scheduler.run_due() == 2
    (seen_group,) = seen.groups
    assert seen_group is not None
    outcomes = {m.instance_id: (m.outcome, m.value) for m in seen_group.members}
    assert outcomes == {"ok": ("succeeded", {"square": 4}), "bad": ("abandoned", None)}
    bad = next(m for m in seen_group.members if m.instance_id == "bad")
    assert bad.error is not None
    assert bad.error.splitlines()[0] == "RuntimeError: bad failed"


async def test_an_undecodable_member_has_finished(db: Harness, clock: ManualClock) -> None:
    @dataclasses.dataclass
    class Shape:
        x: int

    seen = Seen()
    _, callback, _ = _tasks(seen)
    typed = one_time("typed", payload_type=Shape)(lambda ctx: None)
    scheduler = db.scheduler([typed, callback], clock)
    group = await db.resolve(
        scheduler.schedule_group(
            db.engine, [typed.instance("t", Shape(1))], then=callback.instance("c")
        )
    )
    with db.sync_engine.begin() as conn:  # the payload no longer decodes
        conn.execute(
            db.table.update().where(db.table.c.task_instance == "t").values(task_data={"y": "oops"})
        )
    assert await _run_all(scheduler, clock) == 2
    (seen_group,) = seen.groups
    assert seen_group is not None
    assert seen_group.id == group.id
    assert [m.outcome for m in seen_group.members] == ["undecodable"]


async def test_a_group_with_no_new_member_makes_its_callback_due_at_once(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    member, callback, _ = _tasks(seen)
    scheduler = db.scheduler([member, callback], clock)
    await db.resolve(scheduler.schedule(db.engine, member.instance("taken", 1)))
    group = await db.resolve(
        scheduler.schedule_group(
            db.engine, [member.instance("taken", 5)], then=callback.instance("c")
        )
    )
    assert (group.total, group.finished) == (0, True)
    row = db.row("callback", "c")
    assert row is not None
    assert row["execution_time"] == NOW
    assert db.row("member", "taken")["group_id"] is None  # type: ignore[index]


async def test_a_taken_callback_key_is_refused_and_nothing_is_written(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    member, callback, _ = _tasks(seen)
    scheduler = db.scheduler([member, callback], clock)
    await db.resolve(scheduler.schedule(db.engine, callback.instance("c")))
    with pytest.raises(
        ValueError,
        match=r"an execution with a callback's key exists \(task 'callback', instance 'c'\)",
    ):
        await db.resolve(
            scheduler.schedule_group(
                db.engine, [member.instance("m", 1)], then=callback.instance("c")
            )
        )
    assert db.row("member", "m") is None
    assert db.count() == 1


async def test_a_rolled_back_transaction_schedules_no_group(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    member, callback, _ = _tasks(seen)
    scheduler = db.scheduler([member, callback], clock)
    async with db.session() as session:
        await db.resolve(
            scheduler.schedule_group(
                session, [member.instance("m", 1)], then=callback.instance("c")
            )
        )
        await db.rollback(session)
    assert db.count() == 0


async def test_a_chain_runs_link_after_link(db: Harness, clock: ManualClock) -> None:
    seen = Seen()
    _, _, step = _tasks(seen)
    scheduler = db.scheduler([step], clock)
    scheduled = scheduler.schedule(
        db.engine, step.instance("a"), then=[step.instance("b"), step.instance("c")]
    )
    assert await db.resolve(scheduled) is True
    assert db.row("step", "b")["execution_time"] == WAITING  # type: ignore[index]
    assert await scheduler.run_due() == 3
    assert seen.order == ["a", "b", "c"]
    assert db.count() == 0


async def test_a_chain_whose_first_key_is_taken_is_not_scheduled(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    _, _, step = _tasks(seen)
    scheduler = db.scheduler([step], clock)
    assert await db.resolve(scheduler.schedule(db.engine, step.instance("a"))) is True
    assert (
        await db.resolve(scheduler.schedule(db.engine, step.instance("a"), then=step.instance("b")))
        is False
    )
    assert db.row("step", "b") is None


async def test_cancelling_a_group_cancels_its_unstarted_members_and_its_chain(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    member, callback, step = _tasks(seen)
    scheduler = db.scheduler([member, callback, step], clock)
    later = NOW + timedelta(hours=1)
    members = [member.instance(f"m{n}", n, at=later) for n in range(3)]
    group = await db.resolve(
        scheduler.schedule_group(
            db.engine, members, then=[callback.instance("c"), step.instance("s")]
        )
    )
    assert await db.resolve(scheduler.cancel_group(db.engine, group.id)) == 5
    assert db.count() == 0
    progress = await db.resolve(scheduler.group(db.engine, group.id))
    assert progress.cancelled_at == NOW
    assert dict(progress.outcomes) == {"cancelled": 3}
    assert await db.resolve(scheduler.cancel_group(db.engine, group.id)) == 0
    assert await db.resolve(scheduler.group(db.engine, 12345)) is None


async def test_cancelling_the_last_member_makes_the_callback_due(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    member, callback, _ = _tasks(seen)
    scheduler = db.scheduler([member, callback], clock)
    members = [member.instance("now", 1), member.instance("later", 2, at=NOW + timedelta(days=1))]
    await db.resolve(scheduler.schedule_group(db.engine, members, then=callback.instance("c")))
    assert await scheduler.run_due() == 1
    assert seen.groups == []
    assert await db.resolve(scheduler.cancel(db.engine, "member", "later")) is True
    assert await scheduler.run_due() == 1
    (seen_group,) = seen.groups
    assert seen_group is not None
    outcomes = sorted((m.instance_id, m.outcome) for m in seen_group.members)
    assert outcomes == [("later", "cancelled"), ("now", "succeeded")]


async def test_a_handler_schedules_a_group_with_its_success(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    member, callback, _ = _tasks(seen)

    def fan_out(ctx: Any) -> None:
        ctx.schedule_group(
            [member.instance(f"m{n}", n) for n in range(2)], then=callback.instance("c")
        )
        if ctx.payload == "fail":
            raise RuntimeError("no fan-out this time")

    start = one_time("start", max_retries=0)(fan_out)
    scheduler = db.scheduler([start, member, callback], clock)
    await db.resolve(scheduler.schedule(db.engine, start.instance("bad", "fail")))
    assert await scheduler.run_due() == 1
    assert db.count() == 0  # the failed attempt's group went with it
    await db.resolve(scheduler.schedule(db.engine, start.instance("good", "ok")))
    assert await _run_all(scheduler, clock) == 4
    assert seen.order[-1] == "c"


async def test_a_custom_member_that_runs_again_has_not_finished(
    db: Harness, clock: ManualClock
) -> None:
    from sqla_scheduler import NextAt

    seen = Seen()
    _, callback, _ = _tasks(seen)
    twice = custom("twice")(
        lambda ctx: (
            NextAt(ctx.execution_time + timedelta(seconds=1), 1) if ctx.payload == 0 else None
        )
    )
    scheduler = db.scheduler([twice, callback], clock)
    await db.resolve(
        scheduler.schedule_group(db.engine, [twice.instance("t", 0)], then=callback.instance("c"))
    )
    assert await scheduler.run_due() == 1
    assert seen.groups == []
    clock.advance(timedelta(seconds=1))
    assert await scheduler.run_due() == 2
    assert len(seen.groups) == 1


async def test_bad_groups_are_refused_before_anything_is_written(db: Harness) -> None:
    every = recurring("every")(lambda ctx: None)
    seen = Seen()
    member, _, _ = _tasks(seen)
    scheduler = db.scheduler([every, member])
    recurring_instance = every.instance("e", schedule="FIXED_DELAY|1h")
    with pytest.raises(TypeError, match="a recurring task's instance cannot be in a group"):
        scheduler.schedule_group(db.engine, [recurring_instance])  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="task 'every': a recurring task's instance cannot be"):
        scheduler.schedule(db.engine, member.instance("m", 1), then=recurring_instance)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="then must be a TaskInstance or a non-empty list"):
        scheduler.schedule(db.engine, member.instance("m", 1), then=[])  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="group_id must be an int from 1"):
        scheduler.group(db.engine, 0)  # type: ignore[call-overload]
    assert db.count() == 0


async def test_a_group_of_many_members_counts_down_without_scanning(
    db: Harness, clock: ManualClock
) -> None:
    """300 members finished in batches: the count reaches 0 once, and the callback sees
    every one (the bench's drain_with_group drains a group of 10,000 beside other work)."""
    seen = Seen()
    _, callback, _ = _tasks(seen)
    quick = one_time("quick")(lambda ctx: None)
    scheduler = db.scheduler([quick, callback], clock, concurrency=100)
    members = [quick.instance(f"q{n}") for n in range(300)]
    group = await db.resolve(
        scheduler.schedule_group(db.engine, members, then=callback.instance("c"))
    )
    assert group.total == 300
    assert await _run_all(scheduler, clock, rounds=2) == 301
    (seen_group,) = seen.groups
    assert seen_group is not None
    assert (seen_group.remaining, dict(seen_group.outcomes)) == (0, {"succeeded": 300})


async def test_cancelling_a_waiting_link_cancels_the_links_after_it(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    _, _, step = _tasks(seen)
    scheduler = db.scheduler([step], clock)
    later = NOW + timedelta(hours=1)
    chain = [step.instance("b"), step.instance("c")]
    await db.resolve(scheduler.schedule(db.engine, step.instance("a", at=later), then=chain))
    assert await db.resolve(scheduler.cancel(db.engine, "step", "b")) is True
    assert db.row("step", "c") is None  # it waited for b: it goes with it
    clock.advance(timedelta(hours=2))
    assert await scheduler.run_due() == 1
    assert seen.order == ["a"]


async def test_cancelling_a_chains_first_link_cancels_the_links_after_it(
    db: Harness, clock: ManualClock
) -> None:
    """The first link is a chain's as much as the others (issue 46, item 6): cancelled
    before it ran, it takes the links after it; a one-member group's callback, whose rows
    are alike but for the chain's mark, is made due by its member's cancel instead."""
    seen = Seen()
    member, callback, step = _tasks(seen)
    scheduler = db.scheduler([member, callback, step], clock)
    later = NOW + timedelta(hours=1)
    chain = [step.instance("b"), step.instance("c")]
    await db.resolve(scheduler.schedule(db.engine, step.instance("a", at=later), then=chain))
    group = await db.resolve(
        scheduler.schedule_group(
            db.engine, [member.instance("m", 1, at=later)], then=callback.instance("r")
        )
    )
    assert await db.resolve(scheduler.cancel(db.engine, "step", "a")) is True
    assert await db.resolve(scheduler.cancel(db.engine, "member", "m")) is True
    assert db.row("step", "b") is None
    assert db.row("step", "c") is None
    clock.advance(timedelta(hours=2))
    assert await scheduler.run_due() == 1
    assert seen.order == ["r"]  # the group's callback, and nothing of the chain
    assert not group.chain


async def test_a_waiting_callback_cannot_be_run_now_or_moved(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    member, callback, _ = _tasks(seen)
    scheduler = db.scheduler([member, callback], clock)
    later = NOW + timedelta(hours=1)
    await db.resolve(
        scheduler.schedule_group(
            db.engine, [member.instance("m", 1, at=later)], then=callback.instance("c")
        )
    )
    assert await db.resolve(scheduler.run_now(db.engine, "callback", "c")) is False
    assert await db.resolve(scheduler.reschedule(db.engine, "callback", "c", NOW)) is False
    execution = await db.resolve(scheduler.get_execution(db.engine, "callback", "c"))
    assert execution.waiting
    assert execution.status(NOW) == "waiting"
    assert await scheduler.run_due() == 0


async def test_a_member_keeps_its_outcome_when_its_value_is_not_json(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    _, callback, _ = _tasks(seen)
    odd = one_time("odd")(lambda ctx: {1, 2})  # keeps no result: its outcome is what counts
    scheduler = db.scheduler([odd, callback], clock)
    await db.resolve(
        scheduler.schedule_group(db.engine, [odd.instance("o")], then=callback.instance("c"))
    )
    assert await scheduler.run_due() == 2
    (seen_group,) = seen.groups
    assert seen_group is not None
    assert [(m.outcome, m.value) for m in seen_group.members] == [("succeeded", None)]


async def test_cancelling_a_group_whose_callback_ran_changes_nothing(
    db: Harness, clock: ManualClock
) -> None:
    seen = Seen()
    member, callback, _ = _tasks(seen)
    scheduler = db.scheduler([member, callback], clock, result_retention=timedelta(days=1))
    group = await db.resolve(
        scheduler.schedule_group(db.engine, [member.instance("m", 2)], then=callback.instance("c"))
    )
    assert await scheduler.run_due() == 2
    assert await db.resolve(scheduler.cancel_group(db.engine, group.id)) == 0
    progress = await db.resolve(scheduler.group(db.engine, group.id))
    assert (progress.cancelled_at, progress.finished_at) == (None, NOW)
    clock.advance(timedelta(days=2))  # ended longer ago than result_retention: pruned
    assert await scheduler.prune_results() == 2  # the member's and the callback's
    assert await db.resolve(scheduler.group(db.engine, group.id)) is None
