"""The nodes table's statements: a scheduler records itself, removes itself, is listed."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Delete, Select, Table, bindparam, delete, select

from sqla_scheduler._dialects import Backend
from sqla_scheduler.models import nodes_table

__all__ = ["Nodes"]


class Nodes:
    """Statements on the nodes table that goes with the scheduler's ``table``."""

    def __init__(self, table: Table, backend: Backend) -> None:
        n = self.nodes = nodes_table(table)
        #: Insert the bound row, or overwrite the row of that ``name`` with it: a
        #: scheduler's start and each of its beats are the same statement, and a
        #: scheduler that restarts under its old name replaces the row it left behind.
        written = [column.name for column in n.c if column.name != "name"]
        self.record: Any = backend.upsert(
            backend.insert(n), lambda new: {name: new[name] for name in written}, None
        )
        #: Delete the row of the bound ``name`` if it is still the one that scheduler
        #: wrote since its ``started_at``: a process that took the name over keeps its row.
        self.remove: Delete = delete(n).where(
            n.c.name == bindparam("name"),
            n.c.started_at == bindparam("started_at", type_=n.c.started_at.type),
        )
        #: Delete the rows last seen before the bound ``threshold``: schedulers that were
        #: killed (a clean stop deletes its own row).
        self.forget: Delete = delete(n).where(
            n.c.last_seen < bindparam("threshold", type_=n.c.last_seen.type)
        )
        #: Every row, by name.
        self.listing: Select[Any] = select(n).order_by(n.c.name)
        #: The row of the bound ``name``.
        self.named: Select[Any] = select(n).where(n.c.name == bindparam("name"))
