"""Choosing the async library: a missing trio is named with the extra that installs it."""

from __future__ import annotations

import sys
from typing import Any

import psycopg
import pytest
from sqlalchemy import create_engine, event
from sqlalchemy.exc import DBAPIError

from sqla_scheduler import Scheduler
from sqla_scheduler._dialects import backend_for, tool_engine


def test_start_on_trio_without_trio_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trio", None)  # `import trio` now fails
    scheduler = Scheduler(create_engine("sqlite://"), tasks=[])

    with pytest.raises(ImportError, match=r"pip install 'sqla-scheduler\[trio\]'"):
        scheduler.start(backend="trio")
    assert not scheduler.running


def test_an_sqlite_without_returning_is_refused_by_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sqlite3

    from sqla_scheduler._dialects import backend_for

    engine = create_engine("sqlite://")
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    with pytest.raises(NotImplementedError, match=r"needs SQLite 3\.35\.0 or newer.*is 3\.31\.1"):
        backend_for(engine.dialect)


@pytest.mark.parametrize(
    ("error", "lost"),
    [
        (
            psycopg.errors.DuplicatePreparedStatement('prepared statement "_pg3_0" already exists'),
            True,
        ),
        (
            psycopg.errors.InvalidSqlStatementName('prepared statement "_pg3_3" does not exist'),
            True,
        ),
        (
            psycopg.errors.ProtocolViolation(
                'bind message supplies 2 parameters, but prepared statement "_pg3_4" requires 1'
            ),
            True,
        ),
        (psycopg.errors.ProtocolViolation("unexpected message type 0x50"), False),
        (psycopg.errors.SerializationFailure("could not serialize access"), False),
    ],
    ids=["duplicate", "unknown-name", "bind-of-another-statement", "other-protocol", "other"],
)
def test_every_sign_of_a_statement_prepared_by_another_client(error: Exception, lost: bool) -> None:
    """Behind a pooler in transaction mode a statement psycopg prepared may be gone, may
    exist already, or may be another client's with other parameters (issue 46, item 3)."""
    wrapped = DBAPIError("SELECT 1", {}, error)
    dialect = create_engine("postgresql+psycopg://u@127.0.0.1:1/d").dialect  # not connected
    assert backend_for(dialect).prepared_lost(wrapped) is lost


def test_the_tools_engines_prepare_nothing() -> None:
    """Migrations, health checks and listings (the commands) run through a pooler in
    transaction mode: psycopg prepares nothing on their connections."""
    sent: dict[str, Any] = {}

    def connecting(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        sent.update(cparams)
        raise ConnectionAbortedError("only the arguments are looked at")

    engine = tool_engine("postgresql+psycopg://u@127.0.0.1:1/d")
    event.listen(engine, "do_connect", connecting)
    with pytest.raises(ConnectionAbortedError):
        engine.connect()
    assert sent["prepare_threshold"] is None
