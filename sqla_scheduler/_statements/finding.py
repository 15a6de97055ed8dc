"""What the listings share to find rows beyond their task and instance: a substring of
the error, a time range, an order chosen from a whitelist, and the task names seen in a
table; and the filters of the two tables of finished executions (history and kept
results), which carry one of these. Core expressions only; no I/O here."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Select, case, select

from sqla_scheduler._result import ResultOutcome

__all__ = [
    "Finding",
    "FinishedFilter",
    "HistoryFilter",
    "ResultFilter",
    "order_by",
    "seen_task_names",
    "where_found",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """A listing's filter beyond task and instance, and its order.

    ``error`` matches rows whose error contains that text (case-insensitively, LIKE's
    wildcards matching literally); ``since`` and ``until`` bound the listing's time column
    (inclusive, exclusive); ``sort`` is one of the listing's sort keys (``None``: its
    default order), ``descending`` its direction.
    """

    error: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    sort: str | None = None
    descending: bool = False


#: No filter beyond task and instance, the default order.
NOTHING = Finding()


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishedFilter:
    """Which rows of a table of finished executions: of ``task``, of the instance
    ``instance`` exactly or those containing ``instance_contains``, and what ``finding``
    finds (and orders by); ``None`` for any."""

    task: str | None = None
    instance: str | None = None
    instance_contains: str | None = None
    finding: Finding = NOTHING


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryFilter(FinishedFilter):
    """Which history entries: with one of ``outcomes`` (``None``: any), finished at or
    after ``since`` (``None``: whenever)."""

    outcomes: tuple[str, ...] | None = None
    since: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultFilter(FinishedFilter):
    """Which kept results: with one ``outcome`` (``None``: any)."""

    outcome: ResultOutcome | None = None


def where_found(
    finding: Finding, *, error: ColumnElement[Any] | None, time: ColumnElement[Any]
) -> list[ColumnElement[bool]]:
    """The WHERE clauses of ``finding`` over a listing's ``error`` and ``time`` columns."""
    where: list[ColumnElement[bool]] = []
    if finding.error and error is not None:
        # a bound pattern with LIKE's wildcards escaped: the text matches as written
        where.append(error.icontains(finding.error, autoescape=True))
    if finding.since is not None:
        where.append(time >= finding.since)
    if finding.until is not None:
        where.append(time < finding.until)
    return where


def order_by(
    finding: Finding,
    c: Any,
    keys: Mapping[str, Sequence[str]],
    default: Sequence[Any],
    tie: Sequence[str],
    nullable: Collection[str] = (),
) -> list[Any]:
    """The ORDER BY of a listing over the columns ``c`` (a table's or a page's):
    ``default`` without a sort key, else the columns named by ``keys[finding.sort]`` in
    its direction, then those of ``tie`` (a unique key, so that pages do not overlap).
    The ``nullable`` columns sort their NULLs last either way, on every database
    (MariaDB has no ``NULLS LAST``)."""
    if finding.sort is None:
        return list(default)
    order: list[Any] = []
    for name in dict.fromkeys([*keys[finding.sort], *tie]):
        column = c[name]
        if name in nullable:
            order.append(case((column.is_(None), 1), else_=0))
        order.append(column.desc() if finding.descending else column.asc())
    return order


def seen_task_names(column: ColumnElement[str], limit: int) -> Select[Any]:
    """Up to ``limit`` distinct task names of ``column``, in order: a GROUP BY on the
    indexed name column, which the database reads in index order and stops at the
    limit."""
    return select(column).group_by(column).order_by(column).limit(limit)
