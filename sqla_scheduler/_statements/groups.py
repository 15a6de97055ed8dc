"""The groups' statements: create a group, count its members down as they finish, make
its callback due, show its progress, and cancel it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Insert,
    Select,
    Table,
    Update,
    bindparam,
    case,
    func,
    insert,
    select,
    update,
)

from sqla_scheduler._dialects import Backend
from sqla_scheduler._statements.shapes import Shapes
from sqla_scheduler.models import groups_table, results_table

__all__ = ["Groups"]


class Groups(Shapes):
    """Statements on ``table``'s groups table, and on the members and callbacks in
    ``table`` (``Shapes`` describes ``table`` itself)."""

    def __init__(self, table: Table, backend: Backend) -> None:
        super().__init__(table, backend)
        g = groups_table(table)
        r = results_table(table)
        c = table.c
        self.groups = g
        at_group = g.c.id == bindparam("group_id")
        #: Create a group, its values bound by column name.
        self.create: Insert = insert(g)
        #: Count the group ``group_id`` down by ``finished`` members; the one that brings
        #: it to 0 stamps ``finished_at``. ``finished_at`` is assigned first: MySQL
        #: evaluates SET from left to right, so it must see ``remaining`` as it was.
        left = g.c.remaining - bindparam("finished")
        self.count_down: Update = (
            update(g)
            .where(at_group)
            .ordered_values(
                (g.c.finished_at, case((left <= 0, self.time("now")), else_=g.c.finished_at)),
                (g.c.remaining, left),
            )
        )
        #: The group ``group_id`` as it is now.
        self.get: Select[Any] = select(g).where(at_group)
        #: Make the callback at the bound key, waiting for the group ``awaited``, due at
        #: ``now``.
        self.release: Update = (
            update(table)
            .where(
                self.at_key,
                c.awaits == bindparam("awaited"),
                c.execution_time == self.time("waiting"),
                self.unpicked,
            )
            .values(execution_time=self.time("now"))
        )
        #: How many of the group's members finished with each outcome.
        self.outcome_counts: Select[Any] = (
            select(r.c.outcome, func.count().label("count"))
            .where(r.c.group_id == bindparam("group_id"))
            .group_by(r.c.outcome)
        )
        #: The finished members' outcomes, in the order they finished.
        self.members: Select[Any] = (
            select(r.c.task_name, r.c.task_instance, r.c.outcome, r.c.value, r.c.error)
            .add_columns(r.c.finished_at)
            .where(r.c.group_id == bindparam("group_id"))
            .order_by(r.c.id)
        )
        #: The group and callback of the execution at the bound key that is not running,
        #: locked until the caller's transaction ends.
        self.membership: Select[Any] = (
            select(c.group_id, c.awaits).where(self.at_key, self.unpicked).with_for_update()
        )
        #: The group's members that are not running, locked for their cancel.
        self.unstarted: Select[Any] = (
            select(c.task_name, c.task_instance)
            .where(c.group_id == bindparam("group_id"), self.unpicked)
            .with_for_update()
        )
        #: Whether the bound key is taken (a callback cannot take over an execution).
        self.exists: Select[Any] = select(c.task_name).where(self.at_key)
        #: Mark the group cancelled at ``now``, once.
        self.cancel: Update = (
            update(g)
            .where(at_group, g.c.cancelled_at.is_(None))
            .values(cancelled_at=self.time("now"))
        )
