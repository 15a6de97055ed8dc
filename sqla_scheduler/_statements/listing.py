"""The read-only queries behind the admin page, the CLI and ``Scheduler.executions``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

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
from sqla_scheduler._execution import EXECUTION_SORTS, ExecutionState
from sqla_scheduler._statements.finding import (
    NOTHING,
    Finding,
    order_by,
    seen_task_names,
    where_found,
)
from sqla_scheduler._statements.shapes import Shapes, count_where

if TYPE_CHECKING:
    from typing_extensions import NotRequired, Unpack

__all__ = ["Listing", "ListingFilter"]


class ListingFilter(TypedDict):
    """Which executions a listing selects (and a bulk action acts on): in ``state``, of
    ``task_name`` (``None``: any), whose instance id contains ``instance_contains``, and
    those ``finding`` finds, their last error containing its text and their execution
    time in its range (ordered as it sorts); the executions of tasks not in
    ``known_tasks`` are the orphaned ones."""

    state: ExecutionState
    task_name: str | None
    known_tasks: frozenset[str]
    instance_contains: NotRequired[str | None]
    finding: NotRequired[Finding]


_KEY = ("task_name", "task_instance")


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
            count_where(self.failing).label("failing"),
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
        #: The same counts for every task name that has rows, registered or not: what the
        #: overview needs of both, in one pass over the table.
        self.counts_by_task: Executable = select(c.task_name, *per_state).group_by(c.task_name)
        #: The rows of the recurring tasks ``names`` (each has one, ``instance``).
        self.recurring: Select[Any] = select(*self.loaded_columns).where(
            c.task_instance == bindparam("instance"), registered, self.loadable
        )

    def list_executions(
        self,
        *,
        limit: int | None,
        offset: int,
        preview: int | None = None,
        **chosen: Unpack[ListingFilter],
    ) -> Select[Any]:
        """Executions ``chosen`` selects, in pick order (the failing ones: latest failure
        first) or in the order its ``finding`` sorts by.

        With ``preview``, the payload and the last error are not read: ``task_data`` and
        ``last_error`` are ``NULL``, and ``task_data_preview`` and ``last_error_preview``
        hold the first ``preview`` characters of the payload's JSON text and of the error,
        so a page costs the same whatever they weigh.
        """
        c = self.table.c
        state, finding = chosen["state"], chosen.get("finding", NOTHING)
        query = select(*self.loaded_columns).where(*self.where(**chosen))
        query = query.order_by(*_order(c, state, finding))
        if limit is not None:
            query = query.limit(limit)
        if offset:
            query = query.offset(offset)
        if preview is None:
            return query
        # The preview is cut from the page's rows only: computed in the query that pages,
        # it would be computed for every row the OFFSET skips as well.
        page = query.subquery("page")
        cut = ("task_data", "last_error")
        columns = [null().label(col.name) if col.name in cut else col for col in page.c]
        data = func.substr(cast(page.c.task_data, Text), 1, preview).label("task_data_preview")
        error = func.substr(page.c.last_error, 1, preview).label("last_error_preview")
        return select(*columns, data, error).order_by(*_order(page.c, state, finding))

    def count_executions(self, **chosen: Unpack[ListingFilter]) -> Select[Any]:
        """How many executions ``list_executions`` would list without a limit."""
        return select(func.count()).select_from(self.table).where(*self.where(**chosen))

    def seen_task_names(self, limit: int) -> Select[Any]:
        """Up to ``limit`` task names that have executions, in order (``task_name`` leads
        the primary key: the database reads them in its order)."""
        return seen_task_names(self.table.c.task_name, limit)

    def where(self, **chosen: Unpack[ListingFilter]) -> list[ColumnElement[bool]]:
        """The WHERE clauses of a listing (and of a bulk action on what it selects)."""
        state, task_name = chosen["state"], chosen["task_name"]
        instance_contains = chosen.get("instance_contains")
        c = self.table.c
        where: list[ColumnElement[bool]] = [self.loadable]
        if state == "scheduled":
            where.append(self.unpicked)
        elif state == "due":
            where += [self.unpicked, c.execution_time <= self.time("now")]
        elif state == "running":
            where.append(self.picked)
        elif state == "failing":
            where.append(self.failing)
        elif state == "orphaned":
            where.append(c.task_name.not_in(sorted(chosen["known_tasks"])))
        if task_name is not None:
            where.append(c.task_name == task_name)
        if instance_contains:
            # A bound pattern with LIKE's wildcards escaped: the text matches as written.
            where.append(c.task_instance.contains(instance_contains, autoescape=True))
        finding = chosen.get("finding", NOTHING)
        return where + where_found(finding, error=c.last_error, time=c.execution_time)


def _order(c: Any, state: ExecutionState, finding: Finding = NOTHING) -> list[Any]:
    """A listing's order over the columns ``c``: the one ``finding`` sorts by, else pick
    order, the failing latest first."""
    if state == "failing":
        default = [c.last_failure.desc(), c.task_name, c.task_instance]
    else:
        default = [c.priority.desc(), c.execution_time, c.task_name, c.task_instance]
    return order_by(finding, c, EXECUTION_SORTS, default, _KEY, nullable=("last_failure",))
