"""The groups' statements: create a group, count its members down as they finish, make
its callback due, show its progress, list the groups and their finished members (the
admin page), and cancel it."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    ColumnElement,
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
        #: ``count_down`` returning the group as it is after (where UPDATE returns rows:
        #: one round trip where two would be, on the path from a member's finish to its
        #: callback's start); ``None``: run ``count_down`` then ``get``.
        self.counted_down: Update | None = backend.returning_updated(self.count_down, *g.c)
        #: The group ``group_id`` as it is now.
        self.get: Select[Any] = select(g).where(at_group)
        #: The same, locked until the caller's transaction ends.
        self.locked: Select[Any] = select(g).where(at_group).with_for_update()
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
        #: Delete up to ``limit`` groups that finished or were cancelled before
        #: ``threshold`` (through a derived table: MariaDB refuses a LIMIT in an IN
        #: subquery). A group still counting its members down stays, however old.
        ended = func.coalesce(g.c.finished_at, g.c.cancelled_at)
        oldest = (
            select(g.c.id)
            .where(ended < bindparam("threshold", type_=g.c.created_at.type))
            .order_by(g.c.created_at)
            .limit(bindparam("limit"))
        )
        ids = select(oldest.subquery("oldest").c.id)
        self.prune: Delete = delete(g).where(g.c.id.in_(ids.scalar_subquery()))
        #: Mark the group cancelled at ``now``, once.
        self.cancel: Update = (
            update(g)
            .where(at_group, g.c.cancelled_at.is_(None))
            .values(cancelled_at=self.time("now"))
        )
        #: How many members of each of the groups bound as the list ``group_ids`` (a
        #: listing's page of them) finished with each outcome: one grouped read through
        #: the results' index on ``group_id``, whatever the number of groups shown.
        self.page_outcome_counts: Select[Any] = (
            select(r.c.group_id, r.c.outcome, func.count().label("count"))
            .where(self._one_of_groups(r.c.group_id))
            .group_by(r.c.group_id, r.c.outcome)
        )
        #: One page (``limit``, ``offset``) of the finished members of the group
        #: ``group_id``, newest first, each with ``value_preview`` and ``error_preview``,
        #: the first ``value_chars`` characters of its value's JSON text and
        #: ``error_chars`` of its error. The page's ids are found first and only their rows
        #: are cut, so that no row the OFFSET skips has its value read.
        page = (
            select(r.c.id)
            .where(r.c.group_id == bindparam("group_id"))
            .order_by(r.c.id.desc())
            .limit(bindparam("limit"))
            .offset(bindparam("offset"))
            .subquery("page")
        )
        self.member_previews: Select[Any] = (
            select(r.c.id, r.c.task_name, r.c.task_instance, r.c.outcome, r.c.finished_at)
            .add_columns(
                func.substr(r.c.value, 1, bindparam("value_chars")).label("value_preview"),
                func.substr(r.c.error, 1, bindparam("error_chars")).label("error_preview"),
            )
            .join_from(page, r, r.c.id == page.c.id)
            .order_by(r.c.id.desc())
        )

    def _one_of_groups(self, column: ColumnElement[int]) -> ColumnElement[bool]:
        """``column`` is one of the ids bound as ``group_ids`` (``Backend.one_of``)."""
        return self.backend.one_of(column, "group_ids", BigInteger())

    def listing(self, *, task_name: str | None) -> Select[Any]:
        """The groups (of callbacks of ``task_name``, when given), newest first: by
        ``created_at``, then by ``id`` so that groups created in the same instant keep one
        order from page to page (ids are random, so they alone would order nothing).
        No limit; the caller adds one or counts them.

        The groups table has no index on ``created_at`` or ``task_name``: a page is a
        top-N sort over the table, of the same order of cost as the count every listing
        makes for its number of pages."""
        g = self.groups
        query = select(g)
        if task_name is not None:
            query = query.where(g.c.task_name == task_name)
        return query.order_by(g.c.created_at.desc(), g.c.id.desc())

    def count(self, *, task_name: str | None) -> Select[Any]:
        """How many groups ``listing`` would list without a limit."""
        g = self.groups
        query = select(func.count()).select_from(g)
        if task_name is not None:
            query = query.where(g.c.task_name == task_name)
        return query
