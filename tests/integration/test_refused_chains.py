"""A refused group or chain writes nothing (issue 46, item 1): whatever makes
``schedule(..., then=)`` or ``schedule_group`` refuse (a callback with a member's key or
another callback's, checked before any statement; a key an execution has already, found as
the insert skips it), the caller's transaction is left as it was, so catching the error and
committing commits exactly what the caller wrote itself."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, event, select

from sqla_scheduler import Scheduler, one_time
from sqla_scheduler.models import groups_table
from tests.support import Harness

# a refused group's statements are the same for a database's two drivers
pytestmark = [pytest.mark.anyio, pytest.mark.databases(async_on=["postgresql"])]

KEYS = [f"k{i}" for i in range(5)]
keys = st.sampled_from(KEYS)


@one_time("job")
def job(ctx: Any) -> None:
    pass


def snapshot(db: Harness) -> tuple[list[tuple[str, str]], int]:
    """The scheduled keys and the number of groups."""
    t, groups = db.table, groups_table(db.table)
    with db.sync_engine.connect() as conn:
        rows = conn.execute(select(t.c.task_name, t.c.task_instance)).all()
        count = len(conn.execute(select(groups.c.id)).all())
    return sorted((r[0], r[1]) for r in rows), count


def wipe(db: Harness) -> None:
    with db.sync_engine.begin() as conn:
        conn.execute(delete(db.table))
        conn.execute(delete(groups_table(db.table)))


async def schedule_refused(
    db: Harness, scheduler: Scheduler, kind: str, members: list[str], then: list[str]
) -> bool:
    """Schedule the caller's own row and then the group or chain, in one transaction;
    commit after a refusal. Whether it was refused."""
    async with db.session() as session:
        await db.resolve(scheduler.schedule(session, job.instance("mine")))
        links = [job.instance(k) for k in then]
        try:
            if kind == "chain":
                done = await db.resolve(
                    scheduler.schedule(session, job.instance(members[0]), then=links)
                )
                refused = not done
            else:
                await db.resolve(
                    scheduler.schedule_group(
                        session, [job.instance(k) for k in members], then=links
                    )
                )
                refused = False
        except ValueError as error:
            refused, message = True, str(error)
            assert "nothing was scheduled" in message
        if refused:
            await db.commit(session)
        else:
            await db.rollback(session)
    return refused


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    kind=st.sampled_from(["group", "chain"]),
    existing=st.sets(keys, max_size=2),
    members=st.lists(keys, min_size=1, max_size=3),
    then=st.lists(keys, min_size=1, max_size=3),
)
async def test_a_refusal_leaves_what_the_caller_wrote(
    db: Harness, kind: str, existing: set[str], members: list[str], then: list[str]
) -> None:
    wipe(db)
    scheduler = db.scheduler([job])
    if existing:
        await db.resolve(scheduler.schedule_batch(db.engine, [job.instance(k) for k in existing]))
    before, groups_before = snapshot(db)
    if await schedule_refused(db, scheduler, kind, members, then):
        after, groups_after = snapshot(db)
        assert after == sorted([*before, ("job", "mine")])
        assert groups_after == groups_before


@pytest.mark.parametrize(
    ("kind", "members", "then"),
    [
        ("chain", ["a"], ["c", "c"]),  # a callback twice
        ("chain", ["a"], ["a"]),  # the instance itself
        ("group", ["x"], ["x"]),  # a member as its own callback
        ("group", ["x", "y"], ["c", "d", "c"]),
    ],
    ids=["then-twice", "then-itself", "group-member-as-callback", "group-callback-twice"],
)
async def test_a_callback_without_a_key_of_its_own_is_refused_before_any_statement(
    db: Harness, kind: str, members: list[str], then: list[str]
) -> None:
    scheduler = db.scheduler([job])
    links = [job.instance(k) for k in then]
    statements: list[str] = []

    def sent(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(db.sync_engine, "before_cursor_execute", sent)
    try:
        attempt = (
            partial(scheduler.schedule, db.sync_engine, job.instance(members[0]), then=links)
            if kind == "chain"
            else partial(
                scheduler.schedule_group,
                db.sync_engine,
                [job.instance(k) for k in members],
                then=links,
            )
        )
        with pytest.raises(ValueError, match="a callback needs a key of its own") as refused:
            attempt()
    finally:
        event.remove(db.sync_engine, "before_cursor_execute", sent)
    assert "nothing was scheduled" in str(refused.value)
    assert statements == []
    assert snapshot(db) == ([], 0)
