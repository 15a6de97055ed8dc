"""Kept results: a task with ``keep_result`` keeps each execution's final outcome and what
its handler returned, whatever the ``history`` setting; ``Scheduler.result`` reads it and
``Scheduler.wait`` waits for it; pruning keeps the table bounded."""

from __future__ import annotations

import dataclasses
import functools
import json
import threading
import time
from datetime import timedelta
from typing import Any

import anyio
import pytest
from sqlalchemy import event, insert, text
from sqlalchemy.ext.asyncio import AsyncEngine

from sqla_scheduler import ManualClock, NextAt, PayloadError, Result, custom, one_time
from sqla_scheduler._dialects import result_channel
from sqla_scheduler._runner.maintenance import PRUNE_BATCH
from sqla_scheduler._statements import statements_on
from sqla_scheduler._store.results import Kept, record
from sqla_scheduler.models import results_table
from tests.support import NOW, Harness

pytestmark = pytest.mark.anyio


@dataclasses.dataclass
class Report:
    url: str
    pages: int


async def _result(db: Harness, scheduler: Any, task: str, instance: str) -> Result | None:
    return await db.resolve(scheduler.result(db.engine, task, instance))  # type: ignore[no-any-return]


async def _wait(db: Harness, scheduler: Any, task: str, instance: str, seconds: float) -> Any:
    """``scheduler.wait``: awaited with an async engine, in a thread with a sync one (it
    blocks), so that the test's own loop goes on."""
    if db.is_async:
        return await scheduler.wait(db.engine, task, instance, timeout=seconds)
    wait = functools.partial(scheduler.wait, db.engine, task, instance, timeout=seconds)
    return await anyio.to_thread.run_sync(wait)


def _reads_of_results(db: Harness) -> list[str]:
    """The statements on the results table that ``db``'s engine runs from now on, each
    added once it has run."""
    reads: list[str] = []
    engine = db.engine.sync_engine if isinstance(db.engine, AsyncEngine) else db.engine

    @event.listens_for(engine, "after_cursor_execute")
    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "scheduled_tasks_results" in statement:
            reads.append(statement)

    return reads


async def test_a_success_keeps_what_the_handler_returned_with_history_on_failures(
    db: Harness, clock: ManualClock
) -> None:
    render = one_time("render", keep_result=True)(
        lambda ctx: {"url": f"/r/{ctx.payload['n']}", "pages": 12, "ratio": 0.5, "big": 2**60}
    )
    scheduler = db.scheduler([render], clock)
    await db.resolve(scheduler.schedule(db.engine, render.instance("r1", {"n": 1})))
    assert await _result(db, scheduler, "render", "r1") is None  # not run yet
    clock.advance(timedelta(seconds=3))
    assert await scheduler.run_due() == 1

    result = await _result(db, scheduler, "render", "r1")
    assert result == Result(
        task_name="render",
        instance_id="r1",
        outcome="succeeded",
        value={"url": "/r/1", "pages": 12, "ratio": 0.5, "big": 2**60},
        error=None,
        finished_at=NOW + timedelta(seconds=3),
    )
    assert result is not None
    assert result.succeeded
    assert type(result.value["pages"]) is int
    assert type(result.value["ratio"]) is float
    assert await db.resolve(scheduler.history(db.engine)) == []  # history keeps failures only


async def test_a_dataclass_result_is_kept_as_its_json_form(db: Harness, clock: ManualClock) -> None:
    render = one_time("render", keep_result=True)(lambda ctx: Report(url="/r", pages=3))
    scheduler = db.scheduler([render], clock)
    await db.resolve(scheduler.schedule(db.engine, render.instance("r1")))
    assert await scheduler.run_due() == 1
    result = await _result(db, scheduler, "render", "r1")
    assert result is not None
    assert result.value == {"url": "/r", "pages": 3}


async def test_a_task_that_does_not_keep_results_has_none(db: Harness, clock: ManualClock) -> None:
    plain = one_time("plain")(lambda ctx: {"x": 1})
    scheduler = db.scheduler([plain], clock, history="all")
    await db.resolve(scheduler.schedule(db.engine, plain.instance("p1")))
    assert await scheduler.run_due() == 1
    assert await _result(db, scheduler, "plain", "p1") is None
    assert await _result(db, scheduler, "never", "scheduled") is None


async def test_a_result_over_max_result_size_fails_the_attempt(
    db: Harness, clock: ManualClock
) -> None:
    big = one_time("big", keep_result=True)(lambda ctx: "x" * 200)
    scheduler = db.scheduler([big], clock, max_result_size=100)
    await db.resolve(scheduler.schedule(db.engine, big.instance("b1")))
    assert await scheduler.run_due() == 1
    row = db.row("big", "b1")
    assert row is not None
    assert row["consecutive_failures"] == 1  # retried, as a failure
    assert "PayloadError: task 'big': result is 202 bytes of JSON" in row["last_error"]
    assert "max_result_size (100 bytes)" in row["last_error"]
    assert await _result(db, scheduler, "big", "b1") is None


async def test_an_unencodable_result_fails_the_attempt_naming_the_task(
    db: Harness, clock: ManualClock
) -> None:
    odd = one_time("odd", keep_result=True)(lambda ctx: {1, 2})
    scheduler = db.scheduler([odd], clock)
    await db.resolve(scheduler.schedule(db.engine, odd.instance("o1")))
    assert await scheduler.run_due() == 1
    row = db.row("odd", "o1")
    assert row is not None
    assert row["consecutive_failures"] == 1
    assert "task 'odd': result {1, 2} is not JSON-serializable" in row["last_error"]


async def test_an_abandoned_execution_keeps_its_last_error(db: Harness, clock: ManualClock) -> None:
    def decline(ctx: Any) -> None:
        raise ValueError(f"no card on file for {ctx.instance_id}")

    charge = one_time("charge", keep_result=True, max_retries=0)(decline)
    scheduler = db.scheduler([charge], clock, history="none")
    await db.resolve(scheduler.schedule(db.engine, charge.instance("c1")))
    assert await scheduler.run_due() == 1
    assert db.row("charge", "c1") is None
    result = await _result(db, scheduler, "charge", "c1")
    assert result is not None
    assert (result.outcome, result.value, result.succeeded) == ("abandoned", None, False)
    assert result.error is not None
    assert result.error.splitlines()[0] == "ValueError: no card on file for c1"


async def test_an_undecodable_payload_is_a_result_too(db: Harness, clock: ManualClock) -> None:
    typed = one_time("typed", payload_type=Report, keep_result=True)(lambda ctx: None)
    scheduler = db.scheduler([typed], clock)
    db.put(task_name="typed", task_instance="bad", task_data={"y": 1}, execution_time=NOW)
    assert await scheduler.run_due() == 1
    result = await _result(db, scheduler, "typed", "bad")
    assert result is not None
    assert result.outcome == "undecodable"
    assert result.error is not None
    assert "PayloadError" in result.error.splitlines()[0]


async def test_a_cancelled_execution_keeps_cancelled(db: Harness, clock: ManualClock) -> None:
    later = one_time("later", keep_result=True)(lambda ctx: 1)
    scheduler = db.scheduler([later], clock)
    instance = later.instance("l1", at=NOW + timedelta(hours=1))
    await db.resolve(scheduler.schedule(db.engine, instance))
    assert await db.resolve(scheduler.cancel(db.engine, "later", "l1")) is True
    result = await _result(db, scheduler, "later", "l1")
    assert result is not None
    assert (result.outcome, result.finished_at) == ("cancelled", NOW)
    assert await db.resolve(scheduler.cancel(db.engine, "later", "l1")) is False


async def test_an_instance_scheduled_again_has_no_result_until_it_finishes_again(
    db: Harness, clock: ManualClock
) -> None:
    runs = iter(range(1, 10))
    count = one_time("count", keep_result=True)(lambda ctx: next(runs))
    scheduler = db.scheduler([count], clock)
    await db.resolve(scheduler.schedule(db.engine, count.instance("c")))
    assert await scheduler.run_due() == 1
    first = await _result(db, scheduler, "count", "c")
    assert first is not None
    assert first.value == 1
    await db.resolve(scheduler.schedule(db.engine, count.instance("c")))
    assert await _result(db, scheduler, "count", "c") is None
    clock.advance(timedelta(seconds=1))
    assert await scheduler.run_due() == 1
    second = await _result(db, scheduler, "count", "c")
    assert second is not None
    assert second.value == 2


async def test_a_custom_task_keeps_what_it_finishes_with(db: Harness, clock: ManualClock) -> None:
    def poll(ctx: Any) -> Any:
        if ctx.payload < 2:
            return NextAt(ctx.execution_time + timedelta(seconds=1), ctx.payload + 1)
        return {"polled": ctx.payload}

    poller = custom("poller", keep_result=True)(poll)
    scheduler = db.scheduler([poller], clock)
    await db.resolve(scheduler.schedule(db.engine, poller.instance("p", 0)))
    for _ in range(2):
        assert await scheduler.run_due() == 1
        assert await _result(db, scheduler, "poller", "p") is None  # it runs again
        clock.advance(timedelta(seconds=1))
    assert await scheduler.run_due() == 1
    result = await _result(db, scheduler, "poller", "p")
    assert result is not None
    assert result.value == {"polled": 2}


async def test_a_custom_task_that_does_not_keep_results_still_refuses_other_values(
    db: Harness, clock: ManualClock
) -> None:
    wrong = custom("wrong")(lambda ctx: 5)
    scheduler = db.scheduler([wrong], clock)
    await db.resolve(scheduler.schedule(db.engine, wrong.instance("w")))
    assert await scheduler.run_due() == 1
    row = db.row("wrong", "w")
    assert row is not None
    assert "keep_result=True" in row["last_error"]


async def test_wait_returns_a_result_that_is_there(db: Harness, clock: ManualClock) -> None:
    done = one_time("done", keep_result=True)(lambda ctx: "ok")
    scheduler = db.scheduler([done], clock)
    await db.resolve(scheduler.schedule(db.engine, done.instance("d")))
    assert await scheduler.run_due() == 1
    result = await _wait(db, scheduler, "done", "d", seconds=5)
    assert result.value == "ok"


async def test_wait_raises_timeout_error_at_its_timeout(db: Harness, clock: ManualClock) -> None:
    slow = one_time("slow", keep_result=True)(lambda ctx: None)
    scheduler = db.scheduler([slow], clock)
    await db.resolve(scheduler.schedule(db.engine, slow.instance("s")))
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"no result of task 'slow', instance 's' within 0.3s"):
        await _wait(db, scheduler, "slow", "s", seconds=0.3)
    assert 0.3 <= time.monotonic() - started < 3


async def test_wait_returns_once_a_running_scheduler_records_the_result(db: Harness) -> None:
    release = threading.Event()

    def handler(ctx: Any) -> int:
        release.wait(10)
        return int(ctx.payload) * 2

    double = one_time("double", keep_result=True)(handler)
    scheduler = db.scheduler([double], polling_interval=timedelta(milliseconds=50))
    await db.resolve(scheduler.schedule(db.engine, double.instance("d", 21)))
    async with scheduler, anyio.create_task_group() as group:
        group.start_soon(anyio.to_thread.run_sync, release.set)
        result = await _wait(db, scheduler, "double", "d", seconds=20)
    assert (result.outcome, result.value) == ("succeeded", 42)


async def test_wait_is_woken_by_the_commit_that_records_the_result(db: Harness) -> None:
    """On PostgreSQL the commit's NOTIFY wakes the waiter: it returns long before the
    second a waiter that listens waits between two reads."""
    if not db.notifies:
        pytest.skip("only PostgreSQL has NOTIFY; elsewhere the waiter reads again")
    scheduler = db.scheduler([one_time("job", keep_result=True)(lambda ctx: None)])
    committed: list[float] = []

    def commit_soon() -> None:
        time.sleep(0.3)  # the waiter has read once and waits
        with db.sync_engine.begin() as conn:
            # an instance id beyond ASCII: PostgreSQL writes it as it is in the NOTIFY
            kept = Kept(task_name="job", instance_id="j-é", outcome="succeeded", finished_at=NOW)
            record(conn, statements_on(conn, db.table), [kept])
        committed.append(time.monotonic())

    async with anyio.create_task_group() as group:
        group.start_soon(anyio.to_thread.run_sync, commit_soon)
        result = await _wait(db, scheduler, "job", "j-é", seconds=10)
    returned = time.monotonic()
    assert result.outcome == "succeeded"
    assert returned - committed[0] < 0.5


@pytest.mark.postgres_only("the NOTIFY that carries a result")
@pytest.mark.parametrize("length", [40, 20_000], ids=["carried", "too-long"])
async def test_the_notify_carries_the_result_unless_it_is_too_long(
    db: Harness, length: int
) -> None:
    """The waiter takes the result from the NOTIFY that announced it, and reads it only
    when it was too long to carry (a NOTIFY holds under 8000 bytes): the same result
    either way, with the value's quotes, backslashes and non-ASCII text intact."""
    scheduler = db.scheduler([one_time("job", keep_result=True)(lambda ctx: None)])
    value = {"text": 'a "quote", a \\ and é€\n' + "x" * length, "n": [1, 2.5, None]}
    kept = Kept(
        task_name="job",
        instance_id="j-é",
        outcome="succeeded",
        finished_at=NOW.replace(microsecond=123456),
        value=json.dumps(value),
    )
    # after the read has run (not before: under load the read could then run after the
    # commit below, find the result and make a second read needless)
    reads = _reads_of_results(db)

    def commit_after_the_first_read() -> None:
        deadline = time.monotonic() + 10
        while not reads and time.monotonic() < deadline:
            time.sleep(0.005)
        with db.sync_engine.begin() as conn:
            record(conn, statements_on(conn, db.table), [kept])

    async with anyio.create_task_group() as group:
        group.start_soon(anyio.to_thread.run_sync, commit_after_the_first_read)
        result = await _wait(db, scheduler, "job", "j-é", seconds=10)
    assert len(reads) == (1 if length == 40 else 2)
    assert result == await _result(db, scheduler, "job", "j-é")
    assert (result.value, result.finished_at) == (value, kept.finished_at)


async def test_wait_refuses_a_session_and_a_bad_timeout(db: Harness) -> None:
    scheduler = db.scheduler([])
    async with db.session() as session:
        with pytest.raises(TypeError, match="wait needs an Engine or an AsyncEngine"):
            scheduler.wait(session, "t", "i", timeout=1)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="timeout must be zero or more"):
        scheduler.wait(db.engine, "t", "i", timeout=-1)  # type: ignore[call-overload]


async def test_results_older_than_the_retention_are_pruned_in_batches(
    db: Harness, clock: ManualClock
) -> None:
    scheduler = db.scheduler([], clock, result_retention=timedelta(days=1))
    old = {"task_name": "t", "outcome": "succeeded", "finished_at": NOW - timedelta(days=2)}
    with db.sync_engine.begin() as conn:
        rows = [{**old, "task_instance": f"i{n}"} for n in range(PRUNE_BATCH + 5)]
        conn.execute(insert(results_table(db.table)), rows)
        conn.execute(
            insert(results_table(db.table)), [{**old, "task_instance": "new", "finished_at": NOW}]
        )
    assert await scheduler.prune_results() == PRUNE_BATCH + 5
    assert await scheduler.prune_results() == 0
    assert await _result(db, scheduler, "t", "new") is not None
    assert await _result(db, scheduler, "t", "i0") is None


def test_keep_result_must_be_a_bool() -> None:
    from sqla_scheduler import TaskDefinitionError

    with pytest.raises(TaskDefinitionError, match="task 'x': keep_result must be True or False"):
        one_time("x", keep_result="yes")(lambda ctx: None)  # type: ignore[call-overload]


def test_encode_result_names_the_task() -> None:
    from sqla_scheduler.results import encode_result

    with pytest.raises(PayloadError, match="task 't': result contains a NUL character"):
        encode_result("t", "\x00x", 100)


def test_a_groups_outcomes_are_a_result_as_the_docs_show_them() -> None:
    """``ctx.group.outcomes`` (a read-only mapping) is kept as the object it stands for,
    as a callback returning it expects (issue 46, item 8); what is no JSON still is not."""
    from types import MappingProxyType

    from sqla_scheduler.results import encode_result

    outcomes = MappingProxyType({"succeeded": 2, "abandoned": 1})
    assert json.loads(encode_result("t", {"outcomes": outcomes})) == {
        "outcomes": {"succeeded": 2, "abandoned": 1}
    }
    with pytest.raises(PayloadError, match="Object of type set is not JSON serializable"):
        encode_result("t", {"odd": {1, 2}})


@pytest.mark.postgres_only("LISTEN connections")
async def test_every_wait_of_a_process_shares_one_listen_connection(db: Harness) -> None:
    """150 waits at once hear their results through the process's one LISTEN connection
    (each wait opened its own: 150 waits held 150 of them; issue 47, item 4), each
    returning its own result, and the connection closes once the last wait has returned."""
    scheduler = db.scheduler([one_time("job", keep_result=True)(lambda ctx: None)])
    keys = [f"j{i}" for i in range(150)]
    reads = _reads_of_results(db)

    listening = text(
        "select count(*) from pg_stat_activity where datname = current_database() "
        "and query = :listen"
    ).bindparams(listen=f'LISTEN "{result_channel(db.table)}"')
    results: dict[str, Any] = {}
    threads = anyio.CapacityLimiter(len(keys))

    async def wait_for(key: str) -> None:
        if db.is_async:
            results[key] = await scheduler.wait(db.engine, "job", key, timeout=30)
        else:
            wait = functools.partial(scheduler.wait, db.engine, "job", key, timeout=30)
            results[key] = await anyio.to_thread.run_sync(wait, limiter=threads)

    async with anyio.create_task_group() as group:
        for key in keys:
            group.start_soon(wait_for, key)
        with anyio.fail_after(30):
            while len(reads) < len(keys):  # noqa: ASYNC110 - counted by the engine's event
                await anyio.sleep(0.01)
        with db.sync_engine.connect() as conn:
            assert conn.execute(listening).scalar_one() == 1
        with db.sync_engine.begin() as conn:
            kept = [
                Kept(
                    task_name="job",
                    instance_id=key,
                    outcome="succeeded",
                    finished_at=NOW,
                    value=json.dumps(key),
                )
                for key in keys
            ]
            record(conn, statements_on(conn, db.table), kept)
    assert {key: result.value for key, result in results.items()} == {key: key for key in keys}
    with anyio.fail_after(10), db.sync_engine.connect() as conn:
        while conn.execute(listening).scalar_one():
            await anyio.sleep(0.05)
            conn.rollback()
