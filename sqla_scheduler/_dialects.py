"""The one seam where PostgreSQL and SQLite differ.

Everything dialect-specific the library does is decided here: which INSERT construct
gives ``ON CONFLICT DO NOTHING``, whether ``SKIP LOCKED`` and ``NOTIFY`` exist, and the
channel name wake-ups use.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect

__all__ = ["Backend", "backend_for", "notify_channel"]

_MAX_CHANNEL = 63  # PostgreSQL identifiers (and so channel names) are at most 63 bytes


@dataclass(frozen=True, slots=True)
class Backend:
    """What one database can do, as far as the scheduler cares."""

    name: str
    supports_notify: bool
    supports_skip_locked: bool

    def insert(self, table: Table) -> Any:
        """An INSERT for ``table`` that supports ``on_conflict_do_nothing``."""
        if self.name == "postgresql":
            return postgresql.insert(table)
        return sqlite.insert(table)


POSTGRESQL = Backend("postgresql", supports_notify=True, supports_skip_locked=True)
SQLITE = Backend("sqlite", supports_notify=False, supports_skip_locked=False)


def backend_for(dialect: Dialect) -> Backend:
    """Return the :class:`Backend` for a SQLAlchemy dialect, or fail naming it."""
    if dialect.name == "postgresql":
        return POSTGRESQL
    if dialect.name == "sqlite":
        return SQLITE
    raise NotImplementedError(
        f"sqla-scheduler supports PostgreSQL and SQLite, not {dialect.name!r}"
    )


def notify_channel(table: Table) -> str:
    """The LISTEN/NOTIFY channel on which schedulers of ``table`` are woken."""
    qualified = f"{table.schema}.{table.name}" if table.schema else table.name
    channel = f"sqla_scheduler.{qualified}"
    if len(channel.encode()) > _MAX_CHANNEL:
        digest = hashlib.sha1(qualified.encode()).hexdigest()[:16]
        channel = f"sqla_scheduler.{digest}"
    return channel
