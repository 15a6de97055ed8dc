"""One statement in autocommit, its own transaction, on a connection of the application's
pool (``Backend.autocommit_statements``: PostgreSQL).

psycopg's connection is switched on the driver itself and back before the connection
returns to the pool. SQLAlchemy's ``isolation_level="AUTOCOMMIT"`` option would do the
same by setting and resetting two settings each way, with its own bookkeeping around
them: on an ``AsyncEngine`` each is a trip through the greenlet bridge, and the four cost
as much as the rest of ``schedule()``'s Python together (issue 35). A driver without
``set_autocommit`` gets SQLAlchemy's option.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.util import await_

__all__ = ["autocommitted"]

log = logging.getLogger("sqla_scheduler")


@contextmanager
def autocommitted(conn: Connection) -> Iterator[None]:
    """``conn`` in autocommit for the block: each statement commits as it runs. Its hooks
    for after the commit (``_commit_hooks.after_commit``) are the caller's to run, once
    the block has returned (``own_commit``)."""
    driver = conn.connection.driver_connection
    set_autocommit = getattr(driver, "set_autocommit", None)
    if set_autocommit is None:
        conn.execution_options(isolation_level="AUTOCOMMIT")  # reset at checkin
        yield
        return
    _call(set_autocommit, True)
    try:
        yield
    finally:
        try:
            _call(set_autocommit, False)
        except Exception:
            # The statement's fate is its own (committed, or its error on its way up);
            # a connection that cannot leave autocommit is not given back to the pool.
            log.debug("a connection could not leave autocommit; discarded", exc_info=True)
            conn.invalidate()


def _call(set_autocommit: Any, value: bool) -> None:
    """psycopg's ``set_autocommit``: a coroutine on an async connection, awaited through
    SQLAlchemy's greenlet bridge (the caller runs in one)."""
    done = set_autocommit(value)
    if inspect.isawaitable(done):
        await_(done)
