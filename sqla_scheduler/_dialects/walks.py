"""How a pick and the wait for the next due time walk the due index: by band, one task
and priority at a time (PostgreSQL), or as one range (SQLite, MariaDB).

Both read the rows of the task names bound as ``names`` that are not paused, among those
the caller's conditions select (``Due``). A ``Backend`` names one walk of each kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import CTE, BindParameter, ColumnElement, Select, String, Table, func, select, true

from sqla_scheduler._dialects.operations import array_param

__all__ = ["Due", "due_by_band", "due_by_range", "next_by_band", "next_by_range"]


@dataclass(frozen=True)
class Due:
    """The rows a walk reads: of ``table``, those whose task is one of the bound
    ``names`` (``of_names``) and not paused (``not_paused(task_name)``), among the
    ``unpicked`` ones."""

    table: Table
    of_names: ColumnElement[bool]
    not_paused: Callable[[ColumnElement[str]], ColumnElement[bool]]
    unpicked: ColumnElement[bool]


def due_by_band(
    due: Due,
    where: Sequence[ColumnElement[bool]],
    address: Sequence[ColumnElement[Any]],
    limit: BindParameter[int],
) -> Select[Any]:
    """The ``address`` (one row locator) of up to ``limit`` rows that ``where`` selects,
    locked, skipping rows others hold: up to ``limit`` rows of each task and priority
    (see ``_bands``), the first ``limit`` of them in priority order, then by time. Rows of
    other tasks are never read, nor future ones, however many there are; one scan for
    ``= ANY(names)`` would step over both. The rows locked and not picked are free when
    the statement ends."""
    c = due.table.c
    band = _bands(due)
    of_band = (
        select(address[0].label("locator"), c.priority, c.execution_time)
        .where(c.task_name == band.c.name, c.priority == band.c.priority, *where)
        .order_by(c.execution_time)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .lateral("of_band")
    )
    return (
        select(of_band.c.locator)
        .select_from(band.join(of_band, true()))
        .order_by(of_band.c.priority.desc(), of_band.c.execution_time)
        .limit(limit)
    )


def due_by_range(
    due: Due,
    where: Sequence[ColumnElement[bool]],
    address: Sequence[ColumnElement[Any]],
    limit: BindParameter[int],
) -> Select[Any]:
    """The ``address`` of up to ``limit`` rows that ``where`` selects, in priority order,
    then by time, locked, skipping rows others hold."""
    c = due.table.c
    return (
        select(*address)
        .where(due.of_names, due.not_paused(c.task_name), *where)
        .order_by(c.priority.desc(), c.execution_time)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )


def next_by_band(due: Due, where: Sequence[ColumnElement[bool]]) -> Select[Any]:
    """The earliest execution time among the rows ``where`` selects: the first of each
    task and priority (see ``_bands``), one index probe each."""
    c = due.table.c
    band = _bands(due)
    first = (
        select(c.execution_time)
        .where(c.task_name == band.c.name, c.priority == band.c.priority, *where)
        .order_by(c.execution_time)
        .limit(1)
        .lateral("first")
    )
    return select(func.min(first.c.execution_time)).select_from(band.join(first, true()))


def next_by_range(due: Due, where: Sequence[ColumnElement[bool]]) -> Select[Any]:
    """The earliest execution time among the rows ``where`` selects."""
    c = due.table.c
    return select(func.min(c.execution_time)).where(
        due.of_names, due.not_paused(c.task_name), *where
    )


def _bands(due: Due) -> CTE:
    """The priorities among the unpicked rows of each task in the array bound as ``names``
    that is not paused: rows ``(name, priority)``, highest priority first, and a last
    one per task with a NULL priority.

    Found by a recursive walk of the due index, one probe per priority, so that a
    statement can then read each task and priority as one range of the index (by time,
    from its first due row or from now) rather than step over the rows of other
    priorities, which a range by time alone cannot skip.
    """
    c = due.table.c
    names = func.unnest(array_param("names", String())).table_valued("name")
    names = names.render_derived(name="each_name")
    highest = select(func.max(c.priority)).where(c.task_name == names.c.name, due.unpicked)
    band = (
        select(names.c.name.label("name"), highest.scalar_subquery().label("priority"))
        .where(due.not_paused(names.c.name))
        .cte("band", recursive=True)
    )
    lower = select(func.max(c.priority)).where(
        c.task_name == band.c.name, due.unpicked, c.priority < band.c.priority
    )
    return band.union_all(
        select(band.c.name, lower.scalar_subquery()).where(band.c.priority.is_not(None))
    )
