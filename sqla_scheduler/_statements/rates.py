"""The rate limits' statements: the starts counted against each task's ``rate_limit``
(``<table>_rates``), and whether a task has executions due. Each runs under the task's
lock (see ``_store.rates``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Delete,
    Insert,
    Select,
    Table,
    Update,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    update,
)

from sqla_scheduler._dialects import Backend
from sqla_scheduler._statements.shapes import Shapes, count_where
from sqla_scheduler.models import rates_table

__all__ = ["Rates"]


class Rates(Shapes):
    """Statements on ``table``'s rates table (``Shapes`` describes ``table`` itself)."""

    def __init__(self, table: Table, backend: Backend) -> None:
        super().__init__(table, backend)
        r = self.rates = rates_table(table)
        name = r.c.task_name == bindparam("name")
        inside = r.c.start_by > bindparam("since", type_=r.c.start_by.type)
        #: For the task ``name``: how many starts are counted that may come after
        #: ``since`` (in its window), and how many entries are older (``stale``). One range
        #: of the index, which holds the counts too.
        self.window: Select[Any] = select(
            func.coalesce(func.sum(case((inside, r.c.starts), else_=0)), 0).label("used"),
            count_where(~inside).label("stale"),
        ).where(name)
        #: The task ``name``'s entries whose starts may come after ``since``, earliest
        #: first: when its window is full, the first whose leaving makes room says when.
        self.entries: Select[Any] = (
            select(r.c.start_by, r.c.starts).where(name, inside).order_by(r.c.start_by)
        )
        #: Count ``starts`` starts of the task ``task_name``, the latest by ``start_by``.
        self.add: Insert = insert(r)
        #: Count ``starts`` fewer starts in the entry ``id``: counted ahead, never picked.
        self.give_back: Update = (
            update(r)
            .where(r.c.id == bindparam("entry"))
            .values(starts=r.c.starts - bindparam("fewer"))
        )
        #: Delete the task ``name``'s entries whose starts all came by ``since``.
        self.prune: Delete = delete(r).where(name, ~inside)
        c = table.c
        #: Whether the task ``name`` has an execution due by ``now`` that a pick would take.
        self.due: Select[Any] = select(
            select(c.task_name)
            .where(
                c.task_name == bindparam("name"),
                self.unpicked,
                c.execution_time <= self.time("now"),
                self.not_paused(c.task_name),
                self.loadable,
            )
            .limit(1)
            .exists()
        )
