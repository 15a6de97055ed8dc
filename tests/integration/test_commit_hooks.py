"""A commit in this process wakes its loops only once the rows are visible to others.

Each hook below looks at the table from a second connection at the moment it is called: a
hook called before the COMMIT has reached PostgreSQL (SQLAlchemy's ``commit`` event on a
connection fires just before it) sees nothing, and a loop woken then would pick nothing and
sleep until its next poll.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime, timezone

import anyio
import pytest
from sqlalchemy import Connection, Engine, create_engine, func, select
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import Session

from sqla_scheduler import _bridge
from sqla_scheduler._commit_hooks import after_commit
from sqla_scheduler.models import table_for

TABLE = table_for()
AT = datetime(2030, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def engine(pg_url: str) -> Iterator[Engine]:
    engine = create_engine(pg_url)
    yield engine
    engine.dispose()


def insert(conn: Connection, instance: str) -> None:
    conn.execute(
        TABLE.insert().values(
            task_name="t", task_instance=instance, execution_time=AT, picked=False, version=1
        )
    )


def visible(engine: Engine) -> int:
    with engine.connect() as other:
        return int(other.scalar(select(func.count()).select_from(TABLE)) or 0)


def insert_hooked(engine: Engine, conn: Connection, instance: str, seen: list[int]) -> None:
    """Insert a row on ``conn``, with a hook on its commit that adds to ``seen`` how many
    rows another connection of ``engine`` sees then."""
    insert(conn, instance)
    after_commit(conn, lambda: seen.append(visible(engine)))


def joined(session: Session) -> Connection:
    """The connection of ``session`` that the library's calls on it use."""
    return _bridge.call(session, TABLE, lambda c: c)


@pytest.mark.parametrize("savepoint", [False, True], ids=["in-the-session", "in-a-savepoint"])
def test_a_session_hook_runs_after_the_commit_is_visible(engine: Engine, savepoint: bool) -> None:
    """A hook of a write in a savepoint waits too: the savepoint's release is not the
    commit."""
    seen: list[int] = []
    with Session(engine) as session:
        with session.begin_nested() if savepoint else contextlib.nullcontext():
            insert_hooked(engine, joined(session), "a", seen)
        assert seen == []
        session.commit()
    assert seen == [1]


def test_a_rolled_back_or_closed_session_calls_nothing(engine: Engine) -> None:
    seen: list[int] = []
    with Session(engine) as session:
        insert_hooked(engine, joined(session), "a", seen)
        session.rollback()
        insert_hooked(engine, joined(session), "b", seen)
    # closed without a commit; the next transaction's commit calls only its own hooks
    with Session(engine) as session:
        insert(joined(session), "c")
        session.commit()
    assert seen == []


def test_a_session_in_the_callers_transaction_waits_for_that_commit(engine: Engine) -> None:
    seen: list[int] = []
    with engine.connect() as outer:
        trans = outer.begin()
        with Session(bind=outer, join_transaction_mode="create_savepoint") as session:
            insert_hooked(engine, joined(session), "a", seen)
            session.commit()  # releases its savepoint; the caller's transaction goes on
        assert seen == []
        trans.commit()
    # The connection's own commit event fires just before its COMMIT: the hook runs, but
    # only a session can promise the rows are visible by then.
    assert len(seen) == 1


def test_an_engine_transaction_of_one_statement_calls_at_once(engine: Engine) -> None:
    seen: list[int] = []

    def work(conn: Connection) -> None:
        insert_hooked(engine, conn, "a", seen)

    _bridge.call(engine, TABLE, work, one_statement=True)
    assert seen == [1]


def test_an_engine_transaction_of_the_librarys_own_calls_after_its_commit(
    engine: Engine,
) -> None:
    seen: list[int] = []

    def work(conn: Connection) -> None:
        insert_hooked(engine, conn, "a", seen)
        insert(conn, "b")
        assert seen == []

    _bridge.call(engine, TABLE, work)
    assert seen == [2]

    def fails(conn: Connection) -> None:
        insert_hooked(engine, conn, "c", seen)
        raise RuntimeError("rolled back")

    with pytest.raises(RuntimeError):
        _bridge.call(engine, TABLE, fails)
    assert seen == [2]


def test_an_async_engine_transaction_calls_after_its_commit(engine: Engine, pg_url: str) -> None:
    seen: list[int] = []

    def work(conn: Connection) -> None:
        insert_hooked(engine, conn, "a", seen)

    async def main() -> None:
        async_engine = create_async_engine(pg_url)
        try:
            await _bridge.call(async_engine, TABLE, work)
        finally:
            await async_engine.dispose()

    anyio.run(main)
    assert seen == [1]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_unit_of_work_calls_after_its_commit(engine: Engine, pg_url: str, mode: str) -> None:
    """``Database.run``: the loop's services' transactions, and the admin page's."""
    seen: list[int] = []

    def work(conn: Connection) -> None:
        insert_hooked(engine, conn, "a", seen)

    async def main() -> None:
        if mode == "async":
            async_engine = create_async_engine(pg_url)
            try:
                await _bridge.Database(async_engine).run(work)
            finally:
                await async_engine.dispose()
        else:
            await _bridge.Database(engine).run(work)

    anyio.run(main)
    assert seen == [1]
