"""The read-only queries behind the admin page, the CLI and ``Scheduler.executions``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    Table,
    Text,
    and_,
    bindparam,
    cast,
    func,
    not_,
    null,
    select,
)
from sqlalchemy.sql.expression import Executable

from sqla_scheduler._dialects import Backend
from sqla_scheduler._execution import ExecutionState
from sqla_scheduler._statements.shapes import Shapes, count_where

__all__ = ["Listing"]


class Listing(Shapes):
    """Counts and listings of the table's executions; ``due`` compares with ``now``."""

    def __init__(self, table: Table, backend: Backend) -> None:
        super().__init__(table, backend)
        c = table.c
        registered = self.one_of(c.task_name, "names")
        due_now = and_(self.unpicked, c.execution_time <= self.time("now"))
        per_state = (
            func.count().label("all"),
            count_where(self.unpicked).label("scheduled"),
            count_where(due_now).label("due"),
            count_where(self.picked).label("running"),
            count_where(c.consecutive_failures > 0).label("failing"),
        )
        #: How many executions are in each state (``names`` are the registered tasks, the
        #: rest are orphaned), in one pass over the table.
        self.state_counts: Executable = select(
            *per_state, count_where(not_(registered)).label("orphaned")
        )
        #: The same counts for each registered task (``names``) that has rows.
        self.task_counts: Executable = (
            select(c.task_name, *per_state).where(registered).group_by(c.task_name)
        )
        #: The rows of the recurring tasks ``names`` (each has one, ``instance``).
        self.recurring: Select[Any] = select(*self.loaded_columns).where(
            c.task_instance == bindparam("instance"), registered, self.loadable
        )

    def list_executions(
        self,
        *,
        state: ExecutionState,
        task_name: str | None,
        known_tasks: frozenset[str],
        limit: int | None,
        offset: int,
        instance_contains: str | None = None,
        preview: int | None = None,
    ) -> Select[Any]:
        """Executions in ``state``, in pick order (the failing ones: latest failure first).

        ``instance_contains`` keeps the executions whose instance id contains that text.
        With ``preview``, the payload is not read: ``task_data`` is ``NULL`` and
        ``task_data_preview`` holds the first ``preview`` characters of its JSON text, so
        a page costs the same whatever the payloads' size.
        """
        c = self.table.c
        query = (
            select(*self.loaded_columns)
            .where(*self._filters(state, task_name, instance_contains, known_tasks))
            .order_by(*_order(c, state))
        )
        if limit is not None:
            query = query.limit(limit)
        if offset:
            query = query.offset(offset)
        if preview is None:
            return query
        # The preview is cut from the page's rows only: computed in the query that pages,
        # it would be computed for every row the OFFSET skips as well.
        page = query.subquery("page")
        columns = [null().label("task_data") if col.name == "task_data" else col for col in page.c]
        cut = func.substr(cast(page.c.task_data, Text), 1, preview).label("task_data_preview")
        return select(*columns, cut).order_by(*_order(page.c, state))

    def count_executions(
        self,
        *,
        state: ExecutionState,
        task_name: str | None,
        instance_contains: str | None,
        known_tasks: frozenset[str],
    ) -> Select[Any]:
        """How many executions ``list_executions`` would list without a limit."""
        return (
            select(func.count())
            .select_from(self.table)
            .where(*self._filters(state, task_name, instance_contains, known_tasks))
        )

    def _filters(
        self,
        state: ExecutionState,
        task_name: str | None,
        instance_contains: str | None,
        known_tasks: frozenset[str],
    ) -> list[ColumnElement[bool]]:
        """The WHERE clauses of a listing."""
        c = self.table.c
        where: list[ColumnElement[bool]] = [self.loadable]
        if state == "scheduled":
            where.append(self.unpicked)
        elif state == "due":
            where += [self.unpicked, c.execution_time <= self.time("now")]
        elif state == "running":
            where.append(self.picked)
        elif state == "failing":
            where.append(c.consecutive_failures > 0)
        elif state == "orphaned":
            where.append(c.task_name.not_in(sorted(known_tasks)))
        if task_name is not None:
            where.append(c.task_name == task_name)
        if instance_contains:
            # A bound pattern with LIKE's wildcards escaped: the text matches as written.
            where.append(c.task_instance.contains(instance_contains, autoescape=True))
        return where


def _order(c: Any, state: ExecutionState) -> list[Any]:
    """A listing's order over the columns ``c``: pick order, the failing latest first."""
    if state == "failing":
        return [c.last_failure.desc(), c.task_name, c.task_instance]
    return [c.priority.desc(), c.execution_time, c.task_name, c.task_instance]
