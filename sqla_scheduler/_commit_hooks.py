"""Calls to make once a transaction has committed: how a commit in this process wakes the
loops that run the work it inserted.

The moment matters. A loop woken before the rows are visible picks nothing and, with no
``NOTIFY`` to follow, sleeps until its next poll. SQLAlchemy's ``commit`` event on a
``Connection`` fires just *before* the driver's COMMIT: on SQLite that is early enough and
safe (the picker waits for the write lock the COMMIT releases, then sees the rows), but on
PostgreSQL another connection may look before the COMMIT is done. A ``Session``'s
``after_commit`` fires after it, so work done through a session (``note_session``) waits
for that; so does a connection the library commits itself (``own_commit``). A caller's
plain connection has nothing later to wait for and keeps the ``commit`` event.

The other way round, ``refuse_commit`` stops a transaction from committing without work
the caller asked for: an async caller's call that was never awaited.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from typing import Any
from weakref import WeakKeyDictionary, WeakSet

from sqlalchemy import Connection, event
from sqlalchemy.orm import Session, SessionTransaction

from sqla_scheduler.exceptions import NotAwaitedError

__all__ = ["after_commit", "note_session", "own_commit", "refuse_commit"]

Hook = Callable[[], None]

#: The session each connection was handed out by (weakly: the session owns the connection).
_sessions: WeakKeyDictionary[Connection, weakref.ref[Session]] = WeakKeyDictionary()
#: What to call when a session's (root) transaction commits, with the connection each hook
#: was registered on.
_on_session_commit: WeakKeyDictionary[Session, list[tuple[Connection, Hook]]] = WeakKeyDictionary()
#: What to call when a connection's transaction commits.
_on_commit: WeakKeyDictionary[Connection, set[Hook]] = WeakKeyDictionary()
#: Connections the library commits itself, with the hooks that wait for that commit.
_owned: WeakKeyDictionary[Connection, list[Hook]] = WeakKeyDictionary()
#: Sessions and connections that carry this module's listeners (once each).
_listening: WeakSet[Any] = WeakSet()
#: Why each session or connection must not commit yet (``refuse_commit``), by token.
_refusals: WeakKeyDictionary[Any, dict[object, str]] = WeakKeyDictionary()
#: Sessions and connections that carry the listeners of ``refuse_commit`` (once each).
_refusing: WeakSet[Any] = WeakSet()


def note_session(conn: Connection, session: Session) -> Connection:
    """Record that ``session`` handed out ``conn``, so hooks wait for its commit; ``conn``."""
    _sessions[conn] = weakref.ref(session)
    return conn


@contextmanager
def own_commit(conn: Connection) -> Iterator[None]:
    """Around a block that commits ``conn``'s transaction itself: the hooks registered in it
    run once the block, its COMMIT included, has returned; none if it raises."""
    hooks: list[Hook] = []
    _owned[conn] = hooks
    try:
        yield
    finally:
        _owned.pop(conn, None)
    for fn in hooks:
        fn()


def after_commit(conn: Connection, fn: Hook) -> None:
    """Call ``fn`` once ``conn``'s transaction has committed (never on a rollback).

    On an autocommit connection the statement has committed already: ``fn`` is called now.
    A session's connection waits for the session's commit, one in ``own_commit`` for that
    block to return, another connection for its own ``commit`` event (see the module's
    note on timing).
    """
    if conn.get_execution_options().get("isolation_level") == "AUTOCOMMIT":
        fn()
        return
    owned = _owned.get(conn)
    if owned is not None:
        owned.append(fn)
        return
    owner = _sessions.get(conn)
    session = owner() if owner is not None else None
    if session is None:
        _on_connection_commit(conn, fn)
        return
    _on_session_commit.setdefault(session, []).append((conn, fn))
    if session not in _listening:
        _listening.add(session)
        event.listen(session, "after_commit", _session_committed)
        event.listen(session, "after_transaction_end", _session_transaction_ended)


def _on_connection_commit(conn: Connection, fn: Hook) -> None:
    _on_commit.setdefault(conn, set()).add(fn)
    if conn not in _listening:
        _listening.add(conn)
        event.listen(conn, "commit", _connection_committed)
        event.listen(conn, "rollback", _connection_rolled_back)


def _session_committed(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint released: nothing is visible to others yet
    for conn, fn in _on_session_commit.pop(session, ()):
        if conn.in_transaction():
            # The session joined a transaction of the caller's connection, which has not
            # committed: wait for that one.
            _on_connection_commit(conn, fn)
        else:
            fn()


def _session_transaction_ended(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        _on_session_commit.pop(session, None)  # rolled back or closed: nothing to tell


def _connection_committed(conn: Connection) -> None:
    for fn in _on_commit.pop(conn, ()):
        fn()


def _connection_rolled_back(conn: Connection) -> None:
    _on_commit.pop(conn, None)


def refuse_commit(owner: Session | Connection, message: str) -> Hook:
    """Refuse ``owner``'s next commit with [`NotAwaitedError`][] (``message``) until the
    returned function is called: an async caller's call made its awaitable, and the work
    happens only once that is awaited. A session's commit is refused (before its flush and
    COMMIT, savepoints aside) until its transaction ends; a connection's COMMIT is
    replaced by a ROLLBACK, since SQLAlchemy has ended its transaction by then.
    """
    token = object()
    _refusals.setdefault(owner, {})[token] = message
    if owner not in _refusing:
        _refusing.add(owner)
        if isinstance(owner, Session):
            event.listen(owner, "before_commit", _session_committing)
            event.listen(owner, "after_transaction_end", _session_refusals_ended)
        else:
            event.listen(owner, "commit", _connection_committing)
            event.listen(owner, "rollback", _connection_refusals_ended)
    return partial(_release, owner, token)


def _release(owner: Any, token: object) -> None:
    refusals = _refusals.get(owner)
    if refusals is not None:
        refusals.pop(token, None)


def _refused(messages: list[str]) -> NotAwaitedError:
    others = len(messages) - 1
    more = f" (and {others} more call{'s' if others > 1 else ''} not awaited)" if others else ""
    return NotAwaitedError(messages[0] + more)


def _session_committing(session: Session) -> None:
    if session.in_nested_transaction():
        return  # a savepoint: the outer transaction has not committed yet
    messages = list(_refusals.get(session, {}).values())
    if messages:
        raise _refused(messages)


def _session_refusals_ended(session: Session, transaction: SessionTransaction) -> None:
    if transaction.parent is None:
        _refusals.pop(session, None)


def _connection_committing(conn: Connection) -> None:
    messages = list(_refusals.pop(conn, {}).values())
    if messages:
        # the caller's transaction is over whatever happens next: end it in the database too
        conn.engine.dialect.do_rollback(conn.connection)
        raise _refused(messages)


def _connection_refusals_ended(conn: Connection) -> None:
    _refusals.pop(conn, None)
