"""The kept results' statements: record final outcomes, read the newest one of an
execution that is not in the scheduler's table, list them with previews, and prune."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Delete,
    Insert,
    Select,
    Table,
    bindparam,
    delete,
    exists,
    func,
    insert,
    literal,
    select,
)

from sqla_scheduler._dialects import Backend, result_channel, sql_notice_of_result
from sqla_scheduler._result import RESULT_SORTS
from sqla_scheduler._statements.finding import Finding, ResultFilter, order_by, where_found
from sqla_scheduler._statements.shapes import Shapes
from sqla_scheduler.models import results_table

__all__ = ["Results"]


class Results(Shapes):
    """Statements on ``table``'s results table (``Shapes`` describes ``table`` itself)."""

    def __init__(self, table: Table, backend: Backend) -> None:
        super().__init__(table, backend)
        r = results_table(table)
        self.results = r
        #: The channel ``Scheduler.wait`` listens on (PostgreSQL).
        self.result_channel = result_channel(table)
        #: Record final outcomes, each entry's values bound by column name.
        self.record: Insert = insert(r)
        #: ``record`` that also announces each result on the results' channel as it is
        #: written (PostgreSQL: a NOTIFY in RETURNING, so the batch of results and their
        #: announcements is one round trip; the payload is ``sql_notice_of_result``'s);
        #: ``None``: there is nothing to announce.
        self.record_announced: Insert | None = None
        if backend.notify is not None:
            notice = sql_notice_of_result(r)
            self.record_announced = insert(r).returning(
                backend.notify(literal(self.result_channel), notice)
            )
        at_key = (
            r.c.task_name == bindparam("key_task"),
            r.c.task_instance == bindparam("key_instance"),
        )
        #: The newest result at the bound key, unless an execution with that key is in the
        #: scheduler's table: it was scheduled again and has not finished.
        self.get: Select[Any] = (
            select(r.c.task_name, r.c.task_instance, r.c.outcome, r.c.value, r.c.error)
            .add_columns(r.c.finished_at)
            .where(*at_key, ~exists().where(self.at_key))
            .order_by(r.c.id.desc())
            .limit(1)
        )
        #: Delete up to ``limit`` results that finished before ``threshold``, oldest first
        #: (through a derived table: MariaDB refuses a LIMIT in an IN subquery).
        oldest = (
            select(r.c.id)
            .where(r.c.finished_at < bindparam("threshold", type_=r.c.finished_at.type))
            .order_by(r.c.finished_at)
            .limit(bindparam("limit"))
        )
        ids = select(oldest.subquery("oldest").c.id)
        self.prune: Delete = delete(r).where(r.c.id.in_(ids.scalar_subquery()))

    def listing(self, chosen: ResultFilter) -> Select[Any]:
        """The results ``chosen`` selects, newest first or in the order its ``finding``
        sorts by, without their values and errors (no limit; the caller adds one or
        counts them). ``instance_contains`` keeps those whose instance id contains that
        text; ``finding`` those whose error contains its text and that finished in its
        range."""
        r = self.results
        query = select(r.c.id, r.c.task_name, r.c.task_instance, r.c.outcome, r.c.finished_at)
        if chosen.instance_contains:
            contains = r.c.task_instance.contains(chosen.instance_contains, autoescape=True)
            query = query.where(contains)
        query = query.where(*where_found(chosen.finding, error=r.c.error, time=r.c.finished_at))
        if chosen.task is not None:
            query = query.where(r.c.task_name == chosen.task)
        if chosen.instance is not None:
            query = query.where(r.c.task_instance == chosen.instance)
        if chosen.outcome is not None:
            query = query.where(r.c.outcome == chosen.outcome)
        return query.order_by(*_result_order(r.c, chosen.finding))

    def previews(
        self, chosen: ResultFilter, *, limit: int, offset: int, value_chars: int, error_chars: int
    ) -> Select[Any]:
        """One page of ``listing`` with ``value_preview`` and ``error_preview``, the first
        ``value_chars`` characters of each value's JSON text and ``error_chars`` of each
        error: a page costs the same whatever the results weigh (up to
        ``max_result_size`` each)."""
        r = self.results
        # The page's ids first, then its rows: values and errors are cut from the page's
        # rows only, not from every row the OFFSET skips.
        page = self.listing(chosen).limit(limit).offset(offset or None).subquery("page")
        return (
            select(
                *page.c,
                func.substr(r.c.value, 1, value_chars).label("value_preview"),
                func.substr(r.c.error, 1, error_chars).label("error_preview"),
            )
            .join_from(page, r, r.c.id == page.c.id)
            .order_by(*_result_order(page.c, chosen.finding))
        )


def _result_order(c: Any, finding: Finding) -> list[Any]:
    """A results listing's order over the columns ``c``: newest first by default."""
    return order_by(finding, c, RESULT_SORTS, [c.id.desc()], ("id",))
