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

from sqla_scheduler import _group_store, _result_store, _store
from sqla_scheduler._bridge import Database
from sqla_scheduler._result import ResultOutcome
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

__all__ = ["ComposedReads", "GroupListing", "MemberListing", "Paging", "ResultListing"]

T = TypeVar("T")


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
        params = {name: getattr(self, name) for name in self.QUERIED}
        return {**params, "page": self.page, **changes}


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultListing(Paging):
    """A results listing request: which kept results, which page."""

    QUERIED = ("task", "instance", "outcome")

    task: str | None
    instance: str | None
    outcome: ResultOutcome | None


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
    ) -> tuple[dict[str, Any], list[T]]:
        """One page of a listing, read in one transaction on ``read_db``: the page's
        header (see ``Reads._header``) with ``now``, the ``total`` that ``count`` counts
        and how many ``pages`` of ``page.per_page`` that makes, and what ``rows`` reads
        (nothing past the last row)."""

        def read(conn: Connection) -> tuple[dict[str, Any], int, list[T]]:
            header = self._header(conn, now)
            total = count(conn)
            return header, total, rows(conn) if page.offset < total else []

        header, total, found = await self.read_db.run(read, read_only=True)
        pages = max(1, math.ceil(total / page.per_page))
        return {"now": now, **header, "total": total, "pages": pages}, found

    async def results(self, listing: ResultListing) -> dict[str, Any]:
        """One page of kept results, newest first, with the counts and how many pages
        there are; each value and error read only as far as its preview shows."""
        now = self.scheduler.clock.now()
        table = self.scheduler.table
        filters: dict[str, Any] = {
            "task_name": listing.task,
            "instance_id": listing.instance,
            "outcome": listing.outcome,
        }

        listed, rows = await self._page(
            now,
            listing,
            partial(_result_store.count_results, table=table, **filters),
            partial(
                _result_store.list_results,
                table=table,
                limit=listing.per_page,
                offset=listing.offset,
                value_chars=RESULT_PREVIEW_CHARS,
                error_chars=PREVIEW_CHARS,
                **filters,
            ),
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
            partial(_group_store.count_groups, table=table, task_name=listing.task),
            partial(
                _group_store.list_groups,
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
            _result_store.Listed | None,
            list[_result_store.Listed],
        ]:
            header = self._header(conn, now)
            group = _group_store.get(conn, table, listing.group_id)
            if group is None:
                return header, None, None, None, []
            execution = kept = None
            name, instance = group.task_name, group.instance_id
            if name is not None and instance is not None:
                execution = _store.get_execution(conn, table, name, instance)
                if execution is None or execution.awaits != group.id:
                    found = _result_store.list_results(
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
                _group_store.list_members(
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
            before = _group_store.locked(conn, table, group_id)
            if before is None or before.cancelled_at is not None:
                return before, None
            cancelled: int = self.scheduler.cancel_group(conn, group_id)
            return before, cancelled

        return await self.db.run(write, read_only=False)
