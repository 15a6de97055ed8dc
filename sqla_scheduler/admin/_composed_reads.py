"""What the admin page reads and writes about composed work: kept results and groups.

A base of ``_reads.Reads`` (its ``scheduler``, ``db``, ``read_db``, page header and
execution views), so that each class stays one screenful of concerns.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any, ClassVar, TypeVar

from sqlalchemy import Connection

from sqla_scheduler import _store
from sqla_scheduler._bridge import Database
from sqla_scheduler._result import ResultOutcome
from sqla_scheduler._statements.finding import Finding
from sqla_scheduler.admin._views import (
    PREVIEW_CHARS,
    RESULT_PREVIEW_CHARS,
    ExecutionView,
    GroupView,
    view_callback,
    view_group,
    view_result,
)
from sqla_scheduler.executions import Execution
from sqla_scheduler.groups import Group
from sqla_scheduler.scheduler import Scheduler

__all__ = [
    "ComposedReads",
    "Found",
    "GroupListing",
    "MemberListing",
    "Paging",
    "ResultListing",
]

T = TypeVar("T")

#: How many task names a listing's filter reads from its table, beside the registered
#: ones: a bounded read of the name index however many rows there are.
SEEN_NAMES = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class Paging:
    """A listing request's page: which one, of how many rows; ``QUERIED`` names the
    fields its links carry in their query string, before the page."""

    QUERIED: ClassVar[tuple[str, ...]] = ()

    page: int
    per_page: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    def query(self, **changes: Any) -> dict[str, Any]:
        """The query string of this page's link, with ``changes`` (another page, say)."""
        params = {name: _query_value(getattr(self, name)) for name in self.QUERIED}
        return {**params, "page": self.page, **changes}


def _query_value(value: Any) -> Any:
    # a time goes into a link as the ISO 8601 text it was read from
    return value.isoformat() if isinstance(value, datetime) else value


#: The query parameters of a listing's filter that ``Found`` adds, in its links' order.
FOUND_QUERIED = ("error", "since", "until", "sort", "dir")


@dataclass(frozen=True, slots=True, kw_only=True)
class Found(Paging):
    """A listing request with what finds rows beyond task and instance: ``error`` text in
    the error, a time range (``since`` inclusive, ``until`` exclusive, both aware), and a
    ``sort`` key with its direction ``dir`` (``asc`` or ``desc``; ``None`` for none)."""

    error: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    sort: str | None = None
    dir: str | None = None

    @property
    def descending(self) -> bool:
        """Whether the sort runs from the largest value."""
        return self.dir == "desc"

    @property
    def finding(self) -> Finding:
        """What the statements are given to filter and order by."""
        return Finding(
            error=self.error,
            since=self.since,
            until=self.until,
            sort=self.sort,
            descending=self.descending,
        )

    @property
    def filtered(self) -> bool:
        """Whether any filter of the page is set (its "clear filters" link is shown)."""
        skip = {"state", "sort", "dir"}
        return any(getattr(self, name) for name in self.QUERIED if name not in skip)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultListing(Found):
    """A results listing request: which kept results, which page. ``instance`` matches an
    instance id exactly (the links to one execution's results), ``instance_contains`` any
    that contains it."""

    QUERIED = ("task", "instance", "instance_contains", "outcome", *FOUND_QUERIED)

    task: str | None
    instance: str | None
    outcome: ResultOutcome | None
    instance_contains: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupListing(Paging):
    """A groups listing request: the groups of which callback task, which page."""

    QUERIED = ("task",)

    task: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberListing(Paging):
    """A group's page: which group, which page of its finished members."""

    QUERIED = ()

    group_id: int


class ComposedReads:
    """The admin page's transactions on kept results and groups."""

    scheduler: Scheduler
    db: Database
    read_db: Database

    def _header(self, conn: Connection, now: datetime) -> dict[str, Any]:
        raise NotImplementedError  # the page header: ``Reads._header``

    def _view(
        self, execution: Execution, now: datetime, preview: str | None = None
    ) -> ExecutionView:
        raise NotImplementedError  # an execution as the pages show it: ``Reads._view``

    async def _page(
        self,
        now: datetime,
        page: Paging,
        count: Callable[[Connection], int],
        rows: Callable[[Connection], list[T]],
        names: Callable[[Connection], list[str]] | None = None,
    ) -> tuple[dict[str, Any], list[T]]:
        """One page of a listing, read in one transaction on ``read_db``: the page's
        header (see ``Reads._header``) with ``now``, the ``total`` that ``count`` counts
        and how many ``pages`` of ``page.per_page`` that makes, what ``rows`` reads
        (nothing past the last row), and the task names the listing's table holds, as
        ``names`` reads them (``seen_tasks``: at most ``SEEN_NAMES``)."""

        def read(conn: Connection) -> tuple[dict[str, Any], int, list[T], list[str]]:
            header = self._header(conn, now)
            total = count(conn)
            seen = [] if names is None else names(conn)
            return header, total, rows(conn) if page.offset < total else [], seen

        header, total, found, seen = await self.read_db.run(read, read_only=True)
        pages = max(1, math.ceil(total / page.per_page))
        listed = {"now": now, **header, "total": total, "pages": pages, "seen_tasks": seen}
        return listed, found

    async def results(self, listing: ResultListing) -> dict[str, Any]:
        """One page of kept results, newest first, with the counts and how many pages
        there are; each value and error read only as far as its preview shows."""
        now = self.scheduler.clock.now()
        table = self.scheduler.table
        filters: dict[str, Any] = {
            "task_name": listing.task,
            "instance_id": listing.instance,
            "outcome": listing.outcome,
            "instance_contains": listing.instance_contains,
            "finding": listing.finding,
        }

        listed, rows = await self._page(
            now,
            listing,
            partial(_store.results.count_results, table=table, **filters),
            partial(
                _store.results.list_results,
                table=table,
                limit=listing.per_page,
                offset=listing.offset,
                value_chars=RESULT_PREVIEW_CHARS,
                error_chars=PREVIEW_CHARS,
                **filters,
            ),
            partial(_store.results.seen_task_names, table=table, limit=SEEN_NAMES),
        )
        return {**listed, "results": [view_result(row) for row in rows]}

    async def groups(self, listing: GroupListing) -> dict[str, Any]:
        """One page of groups, newest first, each with its progress and its finished
        members counted by outcome, with the counts and how many pages there are."""
        now = self.scheduler.clock.now()
        table = self.scheduler.table

        listed, rows = await self._page(
            now,
            listing,
            partial(_store.groups.count_groups, table=table, task_name=listing.task),
            partial(
                _store.groups.list_groups,
                table=table,
                task_name=listing.task,
                limit=listing.per_page,
                offset=listing.offset,
            ),
        )
        return {**listed, "groups": [view_group(group) for group in rows]}

    async def group(self, listing: MemberListing) -> dict[str, Any]:
        """One group (``group`` is ``None`` when there is none) with its callback as it
        stands and one page of its finished members' kept outcomes, newest first, each
        value and error read only as far as its preview shows."""
        now = self.scheduler.clock.now()
        table = self.scheduler.table

        def read(
            conn: Connection,
        ) -> tuple[
            dict[str, Any],
            Group | None,
            Execution | None,
            _store.results.Listed | None,
            list[_store.results.Listed],
        ]:
            header = self._header(conn, now)
            group = _store.groups.get(conn, table, listing.group_id)
            if group is None:
                return header, None, None, None, []
            execution = kept = None
            name, instance = group.task_name, group.instance_id
            if name is not None and instance is not None:
                execution = _store.get_execution(conn, table, name, instance)
                if execution is None or execution.awaits != group.id:
                    found = _store.results.list_results(
                        conn,
                        table,
                        task_name=name,
                        instance_id=instance,
                        limit=1,
                        value_chars=RESULT_PREVIEW_CHARS,
                        error_chars=PREVIEW_CHARS,
                    )
                    kept = found[0] if found else None
            listed = sum(group.outcomes.values())
            members = (
                _store.groups.list_members(
                    conn,
                    table,
                    group.id,
                    limit=listing.per_page,
                    offset=listing.offset,
                    value_chars=RESULT_PREVIEW_CHARS,
                    error_chars=PREVIEW_CHARS,
                )
                if listing.offset < listed
                else []
            )
            return header, group, execution, kept, members

        header, group, execution, kept, members = await self.read_db.run(read, read_only=True)
        view: GroupView | None = None
        listed = 0
        if group is not None:
            callback = view_callback(
                group,
                None if execution is None else self._view(execution, now),
                None if kept is None else view_result(kept),
            )
            view = view_group(group, callback)
            listed = sum(group.outcomes.values())
        return {
            "now": now,
            **header,
            "group": view,
            "total": listed,
            "pages": max(1, math.ceil(listed / listing.per_page)),
            "members": [view_result(m) for m in members],
        }

    async def cancel_group(self, group_id: int) -> tuple[Group | None, int | None]:
        """Cancel the group ``group_id`` as ``Scheduler.cancel_group`` does, unless it was
        cancelled already: the group as it was (``None`` when there is none) and how many
        executions were cancelled (``None`` when nothing was done). The group's row is
        locked first, so that of two cancels at once one is done and one is told so."""
        table = self.scheduler.table

        def write(conn: Connection) -> tuple[Group | None, int | None]:
            before = _store.groups.locked(conn, table, group_id)
            if before is None or before.cancelled_at is not None:
                return before, None
            cancelled: int = self.scheduler.cancel_group(conn, group_id)
            return before, cancelled

        return await self.db.run(write, read_only=False)
