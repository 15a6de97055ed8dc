"""``rate_limit="N/unit"``: at most N executions of a task start in any window of that
length, counted in the database across every scheduler sharing the table; executions
over the limit wait (no failure, no retry counted) and start in priority order as the
window allows; tasks without a limit are unaffected. Real processes:
tests/concurrency/test_rate_limit_across_processes.py."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import select

from sqla_scheduler import (
    ManualClock,
    OneTimeTask,
    RateLimit,
    TaskDefinitionError,
    custom,
    one_time,
    recurring,
)
from sqla_scheduler._runner.waker import AHEAD
from sqla_scheduler.models import rates_table
from tests.support import NOW, Harness, services, wait_for

# what this module tests runs in the scheduler's own units of work, the same statements
# through run_sync as with a sync engine, and every async driver is run by the other
# modules: on SQLite and MariaDB the sync cases carry the database's differences
pytestmark = [pytest.mark.anyio, pytest.mark.databases(async_on=["postgresql"])]

#: How long after its pick an execution that starts at once may start (``_store.rates.slack``:
#: 5% of ``per``, at most 50 ms): what it counts as.
SLACK = timedelta(milliseconds=50)
#: How long after ``per`` a window has room again for picks of executions that start at
#: once: their slack and the window's margin (``_store.rates.margin``: 5%, at most 50 ms).
MARGIN = SLACK + timedelta(milliseconds=50)


def counted(db: Harness, task_name: str) -> list[tuple[datetime, int]]:
    """The starts counted against ``task_name``'s rate limit: the latest they may start,
    and how many."""
    rates = rates_table(db.table)
    with db.sync_engine.connect() as conn:
        found = conn.execute(
            select(rates.c.start_by, rates.c.starts)
            .where(rates.c.task_name == task_name)
            .order_by(rates.c.start_by, rates.c.id)
        )
        return [(at, starts) for at, starts in found]


async def test_over_the_limit_waits_without_failing(db: Harness, clock: ManualClock) -> None:
    ran: list[str] = []
    api = one_time("api", rate_limit="2/m")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([api], clock)
    await db.resolve(scheduler.schedule_batch(db.engine, [api.instance(f"a{i}") for i in range(5)]))
    assert await scheduler.run_due() == 2
    assert await scheduler.run_due() == 0  # the window is full
    waiting = db.count("task_name = 'api' and consecutive_failures = 0 and last_failure is null")
    assert waiting == 3, "the others wait, unpicked, with no failure counted"
    assert db.count("picked = true") == 0
    clock.advance(timedelta(minutes=1))
    assert await scheduler.run_due() == 0, "a margin on top of the minute (see _rate_store)"
    clock.advance(MARGIN)
    assert await scheduler.run_due() == 2
    clock.advance(timedelta(minutes=1) + MARGIN)
    assert await scheduler.run_due() == 1
    assert sorted(ran) == [f"a{i}" for i in range(5)]
    # each pick counted what it took (run_due takes one at a time), to start by its slack
    window = timedelta(minutes=1) + MARGIN
    at = [NOW, NOW, NOW + window, NOW + window, NOW + 2 * window]
    assert counted(db, "api") == [(when + SLACK, 1) for when in at]


async def test_waiting_executions_start_in_priority_order(db: Harness, clock: ManualClock) -> None:
    ran: list[str] = []
    api = one_time("api", rate_limit=RateLimit(2, per=timedelta(seconds=10)))(
        lambda ctx: ran.append(ctx.instance_id)
    )
    scheduler = db.scheduler([api], clock)
    priorities = {"low": -5, "mid": 0, "high": 7, "top": 30, "one": 1}
    await db.resolve(
        scheduler.schedule_batch(
            db.engine, [api.instance(key, priority=p) for key, p in priorities.items()]
        )
    )
    for _ in range(3):
        await scheduler.run_due()
        clock.advance(timedelta(seconds=11))
    assert ran == ["top", "high", "one", "mid", "low"]


async def test_other_tasks_are_not_held_back(db: Harness, clock: ManualClock) -> None:
    ran: list[str] = []
    api = one_time("api", rate_limit="1/h")(lambda ctx: ran.append(ctx.instance_id))
    free = one_time("free")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([api, free], clock)
    await db.resolve(scheduler.schedule_batch(db.engine, [api.instance(f"a{i}") for i in range(3)]))
    await db.resolve(
        scheduler.schedule_batch(db.engine, [free.instance(f"f{i}") for i in range(8)])
    )
    assert await scheduler.run_due() == 9
    # one of the api executions (all due at the same time: which one, the pick's order
    # leaves open), and every free one
    (api_ran,) = [i for i in ran if i.startswith("a")]
    assert api_ran in {"a0", "a1", "a2"}
    assert sorted(i for i in ran if i.startswith("f")) == [f"f{i}" for i in range(8)]
    await db.resolve(
        scheduler.schedule_batch(db.engine, [free.instance(f"g{i}") for i in range(4)])
    )
    assert await scheduler.run_due() == 4


async def test_schedulers_share_the_window(db: Harness, clock: ManualClock) -> None:
    ran: list[str] = []
    api = one_time("api", rate_limit="3/s")(lambda ctx: ran.append(ctx.instance_id))
    first = db.scheduler([api], clock, scheduler_name="first")
    second = db.scheduler([api], clock, scheduler_name="second")
    await db.resolve(first.schedule_batch(db.engine, [api.instance(f"a{i}") for i in range(8)]))
    assert await first.run_due() == 3
    assert await second.run_due() == 0
    clock.advance(timedelta(seconds=1) + MARGIN)
    assert await second.run_due() == 3
    assert await first.run_due() == 0
    assert len(ran) == 6


async def test_every_kind_of_task_takes_a_rate_limit(db: Harness, clock: ManualClock) -> None:
    ran: list[str] = []
    tick = recurring("tick", "FIXED_DELAY|1s", rate_limit="1/m")(lambda ctx: ran.append("tick"))
    poll = custom("poll", rate_limit="1/m")(lambda ctx: ran.append("poll"))
    scheduler = db.scheduler([tick, poll], clock)
    await db.resolve(
        scheduler.schedule_batch(db.engine, [poll.instance("p1"), poll.instance("p2")])
    )
    assert await scheduler.run_due() == 2  # tick and one poll
    clock.advance(timedelta(seconds=5))  # tick is due again, its window is not over
    assert await scheduler.run_due() == 0
    clock.advance(timedelta(minutes=1))
    assert await scheduler.run_due() == 2
    assert sorted(ran) == ["poll", "poll", "tick", "tick"]


async def test_both_limits_hold(db: Harness, clock: ManualClock) -> None:
    ran: list[str] = []
    api = one_time("api", max_concurrency=2, rate_limit="3/m")(
        lambda ctx: ran.append(ctx.instance_id)
    )
    scheduler = db.scheduler([api], clock)
    await db.resolve(scheduler.schedule_batch(db.engine, [api.instance(f"a{i}") for i in range(5)]))
    with db.sync_engine.begin() as conn:  # one place held elsewhere
        conn.execute(
            db.table.update()
            .where(db.table.c.task_instance == "a0")
            .values(picked=True, picked_by="elsewhere")
        )
    assert await scheduler.run_due() == 3  # one at a time (one place left), three a minute
    assert db.count("task_name = 'api'") == 2


async def test_a_late_start_is_handed_back(db: Harness, clock: ManualClock) -> None:
    """An execution picked for a rate-limited task that cannot start right away (here its
    batch's first handler moves the clock past its start-by time) is handed back untouched,
    and picked again; its first slot stays counted."""
    ran: list[str] = []

    def handler(ctx: Any) -> None:
        ran.append(ctx.instance_id)
        clock.advance(timedelta(seconds=1))  # past the others' start-by time (250 ms)

    api = one_time("api", rate_limit="100/m")(handler)  # room to spare: all in one pick
    scheduler = db.scheduler([api], clock)
    await db.resolve(scheduler.schedule_batch(db.engine, [api.instance(f"a{i}") for i in range(3)]))
    await scheduler.run_due()
    assert sorted(ran) == ["a0", "a1", "a2"]
    assert len(ran) == 3, "each ran once"
    assert db.count() == 0
    ahead = timedelta(milliseconds=250)  # the slack of executions picked ahead of workers
    assert counted(db, "api") == [
        (NOW + ahead, 3),  # all three in one pick: the window has room to spare
        (NOW + timedelta(seconds=1) + ahead, 2),  # the two late ones: counted again
        (NOW + timedelta(seconds=2) + ahead, 1),
    ]


async def test_a_backlog_counts_ahead_and_gives_back_what_it_did_not_take(
    db: Harness, clock: ManualClock
) -> None:
    """A full pick from a window with room to spare counts more starts ahead, which the
    next picks take without the lock; once the backlog is drained, what is left goes back:
    the window holds the starts that happened, no more."""
    ran: list[str] = []
    api = one_time("api", rate_limit="1000/m")(lambda ctx: ran.append(ctx.instance_id))
    scheduler = db.scheduler([api], clock, concurrency=10)
    await db.resolve(
        scheduler.schedule_batch(db.engine, [api.instance(f"a{i}") for i in range(25)])
    )
    assert await scheduler.run_due() == 25
    assert sorted(ran) == sorted(f"a{i}" for i in range(25))
    ahead = timedelta(milliseconds=250)  # the slack of executions picked ahead of workers
    assert counted(db, "api") == [(NOW + ahead, 25)], "one pick's entry, 25 starts in all"


async def test_a_lowered_limit_counts_the_starts_so_far(db: Harness, clock: ManualClock) -> None:
    ran: list[str] = []

    def api(limit: str) -> OneTimeTask[Any]:
        return one_time("api", rate_limit=limit)(lambda ctx: ran.append(ctx.instance_id))

    task = api("4/m")
    before = db.scheduler([task], clock)
    await db.resolve(before.schedule_batch(db.engine, [task.instance(f"a{i}") for i in range(2)]))
    assert await before.run_due() == 2
    clock.advance(timedelta(seconds=30))
    await db.resolve(before.schedule_batch(db.engine, [task.instance(f"b{i}") for i in range(2)]))
    assert await before.run_due() == 2
    await db.resolve(before.schedule_batch(db.engine, [task.instance(f"c{i}") for i in range(3)]))
    after = db.scheduler([api("2/m")], clock)
    assert await after.run_due() == 0  # two starts in the last minute already
    clock.advance(timedelta(seconds=31))  # the first two are out of the window
    assert await after.run_due() == 0, "the latest two are not"
    clock.advance(timedelta(seconds=30))
    assert await after.run_due() == 2


async def test_the_picker_comes_back_when_the_window_reopens(
    db: Harness, clock: ManualClock
) -> None:
    """A full window is left out of the picks until its first slot is free, and the
    picker wakes up for that time, not for its poll."""
    api = one_time("api", rate_limit="2/m")(lambda ctx: None)
    scheduler = db.scheduler([api], clock)
    await db.resolve(scheduler.schedule_batch(db.engine, [api.instance(f"a{i}") for i in range(3)]))
    async with services(scheduler) as runner:
        picker = runner.picker
        assert len(await picker.run_once()) == 2
        assert await picker.run_once() == []
        reopen = NOW + timedelta(minutes=1) + MARGIN
        assert picker.limited.reopens == {"api": reopen}
        assert picker.waker.next_at == reopen + AHEAD  # it wakes AHEAD before a time
        clock.advance(timedelta(minutes=1))
        assert picker.limited.now() == [], "still full: not even looked at"
        clock.advance(MARGIN)
        assert [h.execution.instance_id for h in await picker.run_once()] == ["a2"]


async def test_a_full_window_reopens_in_a_running_loop(db: Harness) -> None:
    """With a real clock and a 30 s poll: the third of three executions of a 2-per-second
    task starts as the window reopens (1.1 s after the first), woken by the picker's own
    time, not by a poll."""
    starts: list[float] = []
    api = one_time("api", rate_limit="2/s")(lambda ctx: starts.append(time.monotonic()))
    scheduler = db.scheduler([api], polling_interval=timedelta(seconds=30))
    async with scheduler:
        await db.resolve(
            scheduler.schedule_batch(db.engine, [api.instance(f"a{i}") for i in range(3)])
        )
        await wait_for(lambda: len(starts) == 3, deadline=10)
    assert 1.0 <= starts[2] - starts[0] < 3.0


def test_bad_rate_limits_name_the_task_and_field() -> None:
    for value in ("0/s", "5/ms", "1/8d", "abc", 5, 1.5, "2000000/s"):
        with pytest.raises(TaskDefinitionError, match=r"task 'job': rate_limit"):
            one_time("job", rate_limit=value)(lambda ctx: None)  # type: ignore[arg-type]
    with pytest.raises(TaskDefinitionError, match=r"task 'tick': rate_limit"):
        recurring("tick", "FIXED_DELAY|1m", rate_limit="0/m")(lambda ctx: None)
    with pytest.raises(TaskDefinitionError, match=r"task 'poll': rate_limit"):
        custom("poll", rate_limit="1/0s")(lambda ctx: None)
