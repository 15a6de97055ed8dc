"""What the admin's pages show: what the console reads (``_console``), one transaction a
page, as the views and contexts of the templates and the JSON API."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqla_scheduler._console import Console, Header, Page, Previewed, Shown, page_count
from sqla_scheduler.admin._listings import (
    GroupListing,
    HistoryListing,
    Listing,
    MemberListing,
    Paging,
    ResultListing,
)
from sqla_scheduler.admin._views import (
    EntryView,
    ExecutionView,
    GroupView,
    NodesView,
    counted_outcomes,
    outcomes_window,
    view_callback,
    view_entry,
    view_execution,
    view_group,
    view_listed_entry,
    view_recurring,
    view_result,
    view_tasks,
)
from sqla_scheduler.executions import Execution
from sqla_scheduler.scheduler import Scheduler

__all__ = ["Reads"]


class Reads:
    """The pages' reads of ``scheduler``'s table through ``console``."""

    def __init__(self, scheduler: Scheduler, console: Console) -> None:
        self.scheduler = scheduler
        self.console = console.reads

    def _view(
        self,
        execution: Execution,
        now: datetime,
        preview: str | None = None,
        error: str | None = None,
    ) -> ExecutionView:
        return view_execution(
            execution,
            now=now,
            config=self.scheduler.config,
            tasks=self.scheduler.tasks,
            preview=preview,
            error_preview=error,
        )

    def _views(self, found: list[Previewed], now: datetime) -> list[ExecutionView]:
        # a NULL payload has no JSON text: its preview is that of None
        return [self._view(e, now, "null" if p is None else p, error) for e, p, error in found]

    def _header(self, now: datetime, header: Header) -> dict[str, Any]:
        """What every page's header shows: the executions in each state (``counts``), the
        scheduler nodes (``nodes``) and, read on a replica, how far it lags behind
        (``replica_lag``; ``None`` on the primary), with the time it was read (``now``)."""
        interval = self.scheduler.config.node_heartbeat_interval
        return {
            "now": now,
            "counts": header.counts,
            "nodes": NodesView(nodes=header.nodes, interval=interval),
            "replica_lag": header.replica_lag,
        }

    def _listed(self, page: Page[Any], paging: Paging) -> dict[str, Any]:
        """A listing's header, ``total``, number of ``pages`` and ``seen_tasks``."""
        return {
            **self._header(page.now, page.header),
            "total": page.total,
            "pages": page.pages(paging.per_page),
            "seen_tasks": page.seen,
        }

    def shown(self, shown: Shown[Any]) -> dict[str, Any]:
        """The header of a page that shows one thing."""
        return self._header(shown.now, shown.header)

    async def summary(self) -> dict[str, Any]:
        """The overview: counts, nodes, tasks (paused or not), recurring tasks, and the
        first rows of the running, failing and orphaned executions."""
        config, tasks = self.scheduler.config, self.scheduler.tasks
        window = outcomes_window(config.history_retention)
        found = await self.console.overview(window)
        now = found.now
        counted = counted_outcomes(config.history)
        recurring = {name: self._view(e, now) for name, e in found.recurring.items()}
        return {
            **self._header(now, found.header),
            "tasks": view_tasks(
                tasks, found.task_counts, found.outcomes, found.dead_letters, counted, found.paused
            ),
            "paused": sorted(found.paused),
            # paused by name elsewhere, with no task of that name registered here
            "paused_unregistered": sorted(found.paused - self.console.known),
            "counted_outcomes": counted,
            "outcomes_window": window,
            # what the counts' links list: the same entries, those since the window began
            "outcomes_since": (now - window).isoformat(),
            "dead_letters": sum(found.dead_letters.values()),
            "recurring": view_recurring(tasks, recurring),
            "running": self._views(found.running, now),
            "failing": self._views(found.failing, now),
            "orphaned": self._views(found.orphaned, now),
        }

    async def listing(self, listing: Listing) -> dict[str, Any]:
        """One page of a listing, with the counts and how many pages there are."""
        page = await self.console.executions(
            listing.filter, limit=listing.per_page, offset=listing.offset
        )
        return {**self._listed(page, listing), "executions": self._views(page.rows, page.now)}

    async def one(self, task: str, instance: str) -> tuple[dict[str, Any], ExecutionView | None]:
        """The header (see ``_header``) and the view of one execution (``None`` if there
        is none)."""
        found = await self.console.execution(task, instance)
        view = None if found.value is None else self._view(found.value, found.now)
        return self.shown(found), view

    async def history(self, listing: HistoryListing) -> dict[str, Any]:
        """One page of history entries, with the counts and how many pages there are."""
        page = await self.console.history(
            listing.filter, limit=listing.per_page, offset=listing.offset
        )
        entries = [
            view_listed_entry(entry, data_preview=data, error_preview=error)
            for entry, data, error in page.rows
        ]
        return {**self._listed(page, listing), "entries": entries}

    async def entry(
        self, history_id: int
    ) -> tuple[dict[str, Any], EntryView | None, Execution | None]:
        """The header, the view of one history entry (``None`` if there is none) and the
        execution that has its key in the table now, if one does."""
        found = await self.console.entry(history_id)
        entry, current = found.value
        return self.shown(found), None if entry is None else view_entry(entry), current

    async def results(self, listing: ResultListing) -> dict[str, Any]:
        """One page of kept results, newest first, with the counts and how many pages
        there are; each value and error read only as far as its preview shows."""
        page = await self.console.results(
            listing.filter, limit=listing.per_page, offset=listing.offset
        )
        return {**self._listed(page, listing), "results": [view_result(r) for r in page.rows]}

    async def groups(self, listing: GroupListing) -> dict[str, Any]:
        """One page of groups, newest first, each with its progress and its finished
        members counted by outcome, with the counts and how many pages there are."""
        page = await self.console.groups(
            listing.task, limit=listing.per_page, offset=listing.offset
        )
        return {**self._listed(page, listing), "groups": [view_group(g) for g in page.rows]}

    async def group(self, listing: MemberListing) -> dict[str, Any]:
        """One group (``group`` is ``None`` when there is none) with its callback as it
        stands and one page of its finished members' kept outcomes, newest first."""
        found = await self.console.group(
            listing.group_id, limit=listing.per_page, offset=listing.offset
        )
        read = found.value
        view: GroupView | None = None
        listed = 0
        if read.group is not None:
            execution = None if read.callback is None else self._view(read.callback, found.now)
            kept = None if read.kept is None else view_result(read.kept)
            view = view_group(read.group, view_callback(read.group, execution, kept))
            listed = sum(read.group.outcomes.values())
        return {
            **self.shown(found),
            "group": view,
            "total": listed,
            "pages": page_count(listed, listing.per_page),
            "members": [view_result(m) for m in read.members],
        }
