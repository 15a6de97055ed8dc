"""What every service of one runner is built on: its ``Parts``, kept by a ``Service``.

The picker, the executor, the heartbeaters, maintenance and the due-time reader each work on the
same database and table, read the same config and clock, and dispatch to the same
listeners; ``Runner`` hands them one frozen ``Parts`` rather than five arguments each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Table

from sqla_scheduler._bridge import Database
from sqla_scheduler._statements import statements_for
from sqla_scheduler.clock import Clock
from sqla_scheduler.config import SchedulerConfig
from sqla_scheduler.listeners import SchedulerListener

__all__ = ["Parts", "Service"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Parts:
    """The plain parts the services of one runner share: the database and the table they
    work on, the config, the clock, and the listeners they dispatch to."""

    db: Database
    table: Table
    config: SchedulerConfig
    clock: Clock
    listeners: Sequence[SchedulerListener]


class Service:
    """A service of one runner, built on its ``parts``: it keeps each of them as an
    attribute of its own (``db``, ``table``, ``config``, ``clock``, ``listeners``), and
    the ``statements`` of its table on the engine's database, found once, that it hands
    the stores."""

    def __init__(self, parts: Parts) -> None:
        self.db = parts.db
        self.table = parts.table
        self.statements = statements_for(parts.table, parts.db.backend)
        self.config = parts.config
        self.clock = parts.clock
        self.listeners = parts.listeners
