"""What the admin page reads and writes: each page's rows in one transaction, as views.

Every call runs through ``_bridge.Database``: on a worker thread for a sync engine and
through ``run_sync`` for an async one. Reads go to the scheduler's ``read_engine`` (a
replica's, when it has one), writes to its ``engine``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import Connection

from sqla_scheduler import _store
from sqla_scheduler._bridge import Database
from sqla_scheduler._dialects import replica_lag
from sqla_scheduler._statements.history import REQUEUEABLE
from sqla_scheduler.admin._composed_reads import (
    FOUND_QUERIED,
    SEEN_NAMES,
    ComposedReads,
    Found,
    GroupListing,
    MemberListing,
    ResultListing,
)
from sqla_scheduler.admin._views import (
    PREVIEW_CHARS,
    EntryView,
    ExecutionView,
    NodesView,
    counted_outcomes,
    outcomes_window,
    view_entry,
    view_execution,
    view_listed_entry,
    view_recurring,
    view_tasks,
)
from sqla_scheduler.executions import Execution, ExecutionState
from sqla_scheduler.history import HistoryEntry, Outcome
from sqla_scheduler.scheduler import Scheduler
from sqla_scheduler.tasks import RECURRING_INSTANCE_ID, OneTimeTask

__all__ = ["GroupListing", "HistoryListing", "Listing", "MemberListing", "Reads", "ResultListing"]

#: How many rows of each section the overview shows; the listings page through the rest.
SECTION_ROWS = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class Listing(Found):
    """A listing request: which executions (``instance`` is a substring of the instance
    id; the time range bounds the execution time), which page."""

    QUERIED = ("state", "task", "instance", *FOUND_QUERIED)

    state: ExecutionState
    task: str | None
    instance: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryListing(Found):
    """A history listing request: which entries (of the dead letters alone, or of all
    history), which page. ``instance`` matches an instance id exactly (the links to one
    execution's entries), ``instance_contains`` any that contains it; the time range
    bounds the finish time."""

    QUERIED = ("task", "instance", "instance_contains", "outcome", *FOUND_QUERIED)

    dead_letters: bool
    task: str | None
    instance: str | None
    outcome: Outcome | None
    instance_contains: str | None = None

    @property
    def outcomes(self) -> tuple[str, ...] | None:
        """The outcomes listed; ``None`` for all of them."""
        if self.outcome is not None:
            return (self.outcome,)
        return REQUEUEABLE if self.dead_letters else None


class Reads(ComposedReads):
    """The admin page's transactions on one scheduler's table (those of results and
    groups in ``ComposedReads``)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self.scheduler = scheduler
        self.db = Database(scheduler.engine)
        #: Where the pages read: the primary's ``db`` unless a replica was given.
        self.read_db = (
            self.db
            if scheduler.read_engine is scheduler.engine
            else Database(scheduler.read_engine)
        )

    @property
    def _known(self) -> frozenset[str]:
        return frozenset(self.scheduler.tasks)

    def _view(
        self,
        execution: Execution,
        now: datetime,
        preview: str | None = None,
        error_preview: str | None = None,
    ) -> ExecutionView:
        return view_execution(
            execution,
            now=now,
            config=self.scheduler.config,
            tasks=self.scheduler.tasks,
            preview=preview,
            error_preview=error_preview,
        )

    def _views(
        self, found: list[tuple[Execution, str | None, str | None]], now: datetime
    ) -> list[ExecutionView]:
        # a NULL payload has no JSON text: its preview is that of None
        return [self._view(e, now, "null" if p is None else p, error) for e, p, error in found]

    def _counts(self, conn: Connection, now: datetime) -> dict[str, int]:
        return _store.state_counts(conn, self.scheduler.table, known_tasks=self._known, now=now)

    def _header(
        self, conn: Connection, now: datetime, counts: dict[str, int] | None = None
    ) -> dict[str, Any]:
        """What every page's header shows: the executions in each state (``counts``, read
        unless given), the scheduler nodes (``nodes``) and, read on a replica, how far it
        lags behind (``replica_lag``; ``None`` on the primary)."""
        nodes = self.scheduler.nodes(conn)
        interval = self.scheduler.config.node_heartbeat_interval
        replica = self.read_db is not self.db
        return {
            "counts": self._counts(conn, now) if counts is None else counts,
            "nodes": NodesView(nodes=nodes, interval=interval),
            "replica_lag": replica_lag(conn) if replica else None,
        }

    async def summary(self) -> dict[str, Any]:
        """The overview: counts, nodes, tasks (paused or not), recurring tasks, and the
        first rows of the running, failing and orphaned executions."""
        now = self.scheduler.clock.now()
        config = self.scheduler.config
        window = outcomes_window(config.history_retention)
        table, known = self.scheduler.table, self._known
        recurring_names = [
            name for name, task in self.scheduler.tasks.items() if task.kind == "recurring"
        ]
        section = partial(
            _store.list_previews,
            preview=PREVIEW_CHARS,
            table=table,
            task_name=None,
            known_tasks=known,
            limit=SECTION_ROWS,
            offset=0,
            now=now,
        )

        def read(conn: Connection) -> dict[str, Any]:
            # one pass over the table for the header's counts and each task's
            by_task = _store.counts_by_task(conn, table, now=now)
            counts = _store.state_totals(by_task, known)
            return {
                **self._header(conn, now, counts),
                "paused": self.scheduler.paused_tasks(conn),
                "task_counts": {name: c for name, c in by_task.items() if name in known},
                "outcomes": _store.history.outcome_counts(conn, table, since=now - window),
                "dead_letters": _store.history.dead_letter_counts(conn, table),
                "recurring": _store.recurring_executions(
                    conn, table, names=recurring_names, instance_id=RECURRING_INSTANCE_ID
                ),
                "running": section(conn, state="running"),
                "failing": section(conn, state="failing"),
                # none to list when none was counted
                "orphaned": section(conn, state="orphaned") if counts["orphaned"] else [],
            }

        found = await self.read_db.run(read, read_only=True)
        tasks = self.scheduler.tasks
        counted = counted_outcomes(config.history)
        paused: frozenset[str] = found["paused"]
        return {
            "now": now,
            "counts": found["counts"],
            "nodes": found["nodes"],
            "replica_lag": found["replica_lag"],
            "tasks": view_tasks(
                tasks,
                found["task_counts"],
                found["outcomes"],
                found["dead_letters"],
                counted,
                paused,
            ),
            "paused": sorted(paused),
            # paused by name elsewhere, with no task of that name registered here
            "paused_unregistered": sorted(paused - self._known),
            "counted_outcomes": counted,
            "outcomes_window": window,
            # what the counts' links list: the same entries, those since the window began
            "outcomes_since": (now - window).isoformat(),
            "dead_letters": sum(found["dead_letters"].values()),
            "recurring": view_recurring(
                tasks, {name: self._view(e, now) for name, e in found["recurring"].items()}
            ),
            "running": self._views(found["running"], now),
            "failing": self._views(found["failing"], now),
            "orphaned": self._views(found["orphaned"], now),
        }

    async def listing(self, listing: Listing) -> dict[str, Any]:
        """One page of a listing, with the counts and how many pages there are."""
        now = self.scheduler.clock.now()
        table = self.scheduler.table
        filters: dict[str, Any] = {
            "state": listing.state,
            "task_name": listing.task,
            "instance_contains": listing.instance,
            "known_tasks": self._known,
            "now": now,
            "finding": listing.finding,
        }

        listed, rows = await self._page(
            now,
            listing,
            partial(_store.count_executions, table=table, **filters),
            partial(
                _store.list_previews,
                table=table,
                limit=listing.per_page,
                offset=listing.offset,
                preview=PREVIEW_CHARS,
                **filters,
            ),
            partial(_store.seen_task_names, table=table, limit=SEEN_NAMES),
        )
        return {**listed, "executions": self._views(rows, now)}

    async def one(
        self, task: str, instance: str
    ) -> tuple[datetime, dict[str, Any], ExecutionView | None]:
        """The time, the header (see ``_header``) and the view of one execution (``None``
        if there is none)."""
        now = self.scheduler.clock.now()
        table = self.scheduler.table

        def read(conn: Connection) -> tuple[dict[str, Any], Execution | None]:
            return self._header(conn, now), _store.get_execution(conn, table, task, instance)

        header, found = await self.read_db.run(read, read_only=True)
        return now, header, None if found is None else self._view(found, now)

    async def act(
        self, action: str, task: str, instance: str, shown: int
    ) -> tuple[bool, Execution | None]:
        """Delete (``delete``, as ``Scheduler.cancel`` does) or make due now (the others,
        as ``Scheduler.run_now`` does) one execution, if it is still at version ``shown``;
        whether it was done, and the execution as it is when not. A group's callback that
        waits for its members is not made due: that would run it before them."""
        table = self.scheduler.table
        run_now = self.scheduler._ran_now(task, instance, shown)
        # as Scheduler.cancel does: a task that keeps results keeps "cancelled", at the
        # scheduler's time, so that a waiter on the result is answered now
        registered = self.scheduler.tasks.get(task)
        keep = isinstance(registered, OneTimeTask) and registered.keep_result
        now = self.scheduler.clock.now()

        def write(conn: Connection) -> tuple[bool, Execution | None]:
            if action == "delete":
                done = _store.cancel_shown(
                    conn,
                    table,
                    task_name=task,
                    instance_id=instance,
                    shown_version=shown,
                    now=now,
                    keep_result=keep,
                )
            else:
                current = _store.get_execution(conn, table, task, instance)
                if current is not None and current.waiting:
                    return False, current  # its group's last member makes it due
                done = run_now(conn)
            return done, None if done else _store.get_execution(conn, table, task, instance)

        return await self.db.run(write, read_only=False)

    async def history(self, listing: HistoryListing) -> dict[str, Any]:
        """One page of history entries, with the counts and how many pages there are."""
        now = self.scheduler.clock.now()
        table = self.scheduler.table
        filters: dict[str, Any] = {
            "task_name": listing.task,
            "instance_id": listing.instance,
            "outcomes": listing.outcomes,
            "instance_contains": listing.instance_contains,
            "finding": listing.finding,
        }

        listed, rows = await self._page(
            now,
            listing,
            partial(_store.history.count_entries, table=table, **filters),
            partial(
                _store.history.list_previews,
                table=table,
                limit=listing.per_page,
                offset=listing.offset,
                preview=PREVIEW_CHARS,
                **filters,
            ),
            partial(_store.history.seen_task_names, table=table, limit=SEEN_NAMES),
        )
        entries = [
            view_listed_entry(entry, data_preview=data, error_preview=error)
            for entry, data, error in rows
        ]
        return {**listed, "entries": entries}

    async def entry(
        self, history_id: int
    ) -> tuple[datetime, dict[str, Any], EntryView | None, Execution | None]:
        """The time, the header (see ``_header``), the view of one history entry (``None``
        if there is none) and the execution that has its key in the table now, if one
        does."""
        now = self.scheduler.clock.now()
        table = self.scheduler.table

        def read(
            conn: Connection,
        ) -> tuple[dict[str, Any], HistoryEntry | None, Execution | None]:
            entry = _store.history.get(conn, table, history_id)
            current = (
                None
                if entry is None
                else _store.get_execution(conn, table, entry.task_name, entry.instance_id)
            )
            return self._header(conn, now), entry, current

        header, entry, current = await self.read_db.run(read, read_only=True)
        return now, header, None if entry is None else view_entry(entry), current

    async def set_paused(self, task: str, paused: bool) -> bool:
        """Pause (``paused``) or resume ``task`` as ``Scheduler.pause`` and
        ``Scheduler.resume`` do; whether anything changed."""

        def write(conn: Connection) -> bool:
            if paused:
                return self.scheduler.pause(conn, task)
            return self.scheduler.resume(conn, task)

        return await self.db.run(write, read_only=False)

    async def requeue(self, history_id: int) -> tuple[bool, HistoryEntry | None, bool]:
        """Requeue the entry ``history_id`` as ``Scheduler.requeue`` does; whether it was
        done, the entry (``None`` if there is none), and whether an execution has its key
        in the table after the attempt."""
        table = self.scheduler.table

        def write(conn: Connection) -> tuple[bool, HistoryEntry | None, bool]:
            done = self.scheduler.requeue(conn, history_id)
            entry = _store.history.get(conn, table, history_id)
            if entry is None:
                return done, None, False
            current = _store.get_execution(conn, table, entry.task_name, entry.instance_id)
            return done, entry, current is not None

        return await self.db.run(write, read_only=False)
