"""The read-only queries behind the admin page, the CLI and ``Scheduler.executions``."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, Select, Table, and_, bindparam, func, not_, select
from sqlalchemy.sql.expression import Executable

from sqla_scheduler._dialects import Backend
from sqla_scheduler._execution import ExecutionState
from sqla_scheduler._statements.shapes import Shapes

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
            func.count().filter(self.unpicked).label("scheduled"),
            func.count().filter(due_now).label("due"),
            func.count().filter(self.picked).label("running"),
            func.count().filter(c.consecutive_failures > 0).label("failing"),
        )
        #: How many executions are in each state (``names`` are the registered tasks, the
        #: rest are orphaned), in one pass over the table.
        self.state_counts: Executable = select(
            *per_state, func.count().filter(not_(registered)).label("orphaned")
        )
        #: The same counts for each registered task (``names``) that has rows.
        self.task_counts: Executable = (
            select(c.task_name, *per_state).where(registered).group_by(c.task_name)
        )
        #: The rows of the recurring tasks ``names`` (each has one, ``instance``).
        self.recurring: Select[Any] = select(table).where(
            c.task_instance == bindparam("instance"), registered
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
    ) -> Select[Any]:
        """Executions in ``state``, in pick order (the failing ones: latest failure first).

        ``instance_contains`` keeps the executions whose instance id contains that text.
        """
        c = self.table.c
        query = select(self.table).where(
            *self._filters(state, task_name, instance_contains, known_tasks)
        )
        if state == "failing":
            query = query.order_by(c.last_failure.desc(), c.task_name, c.task_instance)
        else:
            query = query.order_by(
                c.priority.desc(), c.execution_time, c.task_name, c.task_instance
            )
        if limit is not None:
            query = query.limit(limit)
        if offset:
            query = query.offset(offset)
        return query

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
        where: list[ColumnElement[bool]] = []
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
