"""The console's reads: each page's rows in one transaction on the read database, with
the header every page shows."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Protocol, TypeVar

from sqlalchemy import Connection

from sqla_scheduler import _store
from sqla_scheduler._bridge import Database
from sqla_scheduler._console._actions import bulk_count
from sqla_scheduler._console._values import (
    SECTION_ROWS,
    SEEN_NAMES,
    ExecutionFilter,
    GroupPage,
    Header,
    HistoryFilter,
    Overview,
    Page,
    Previewed,
    ResultFilter,
    Shown,
)
from sqla_scheduler._dialects import replica_lag
from sqla_scheduler._execution import RECURRING_INSTANCE_ID, Execution
from sqla_scheduler._history_entry import HistoryEntry
from sqla_scheduler._statements import Statements, statements_for
from sqla_scheduler._store.results import Listed
from sqla_scheduler._store.stats import Activity
from sqla_scheduler.groups import Group
from sqla_scheduler.scheduler import Scheduler

__all__ = ["Reads"]

T = TypeVar("T")


class SeenNames(Protocol):
    """A store's ``seen_task_names``: up to ``limit`` task names its table has, in order."""

    def __call__(self, conn: Connection, statements: Statements, *, limit: int) -> list[str]: ...


class Reads:
    """What an operator's console reads of ``scheduler``'s table, on ``read_db`` (a
    replica's when it is not ``db``); values and errors only as far as ``preview``
    characters, kept results' values as far as ``result_preview``."""

    def __init__(
        self,
        scheduler: Scheduler,
        *,
        db: Database,
        read_db: Database,
        preview: int,
        result_preview: int,
    ) -> None:
        self.scheduler = scheduler
        #: The statements of ``scheduler``'s table on the database, handed to the stores.
        self.statements = statements_for(scheduler.table, db.backend)
        self.clock = scheduler.clock
        self.db = db
        self.read_db = read_db
        self.replica = read_db is not db
        self.preview = preview
        self.result_preview = result_preview

    @property
    def known(self) -> frozenset[str]:
        """The task names registered here."""
        return frozenset(self.scheduler.tasks)

    def _header(self, conn: Connection, now: datetime, counts: dict[str, int] | None) -> Header:
        if counts is None:
            counts = _store.state_counts(conn, self.statements, known_tasks=self.known, now=now)
        return Header(
            counts=counts,
            nodes=self.scheduler.nodes(conn),
            replica_lag=replica_lag(conn) if self.replica else None,
        )

    async def _shown(self, read: Callable[[Connection], T], *, primary: bool = False) -> Shown[T]:
        """What ``read`` reads, with the header, in one transaction on ``read_db`` (on
        ``db`` when ``primary``)."""
        now = self.clock.now()

        def both(conn: Connection) -> tuple[Header, T]:
            return self._header(conn, now, None), read(conn)

        header, value = await (self.db if primary else self.read_db).run(both, read_only=True)
        return Shown(now=now, header=header, value=value)

    async def _page(
        self,
        now: datetime,
        offset: int,
        count: Callable[[Connection, Statements], int],
        rows: Callable[[Connection, Statements], list[T]],
        names: SeenNames | None = None,
    ) -> Page[T]:
        """One page, as of ``now``, of the listing whose stores ``count`` its rows and
        read its ``rows`` (from ``offset`` on), with up to ``SEEN_NAMES`` task names it
        has seen (``names``, a store's ``seen_task_names``), each handed a connection on
        ``read_db`` and the statements."""
        statements = self.statements

        def read(conn: Connection) -> Page[T]:
            total = count(conn, statements)
            return Page(
                now=now,
                header=self._header(conn, now, None),
                total=total,
                seen=[] if names is None else names(conn, statements, limit=SEEN_NAMES),
                rows=rows(conn, statements) if offset < total else [],
            )

        return await self.read_db.run(read, read_only=True)

    async def overview(self, window: timedelta) -> Overview:
        """The overview, its history counted over the ``window`` up to now."""
        now, statements, known = self.clock.now(), self.statements, self.known
        recurring = [n for n, task in self.scheduler.tasks.items() if task.kind == "recurring"]
        section = partial(
            _store.list_previews,
            preview=self.preview,
            statements=statements,
            task_name=None,
            known_tasks=known,
            limit=SECTION_ROWS,
            offset=0,
            now=now,
        )

        def read(conn: Connection) -> Overview:
            # one pass over the table for the header's counts and each task's
            by_task = _store.counts_by_task(conn, statements, now=now)
            counts = _store.state_totals(by_task, known)
            return Overview(
                now=now,
                header=self._header(conn, now, counts),
                paused=self.scheduler.paused_tasks(conn),
                task_counts={name: c for name, c in by_task.items() if name in known},
                outcomes=_store.history.outcome_counts(conn, statements, since=now - window),
                dead_letters=_store.history.dead_letter_counts(conn, statements),
                recurring=_store.recurring_executions(
                    conn, statements, names=recurring, instance_id=RECURRING_INSTANCE_ID
                ),
                running=section(conn, state="running"),
                failing=section(conn, state="failing"),
                # none to list when none was counted
                orphaned=section(conn, state="orphaned") if counts["orphaned"] else [],
            )

        return await self.read_db.run(read, read_only=True)

    async def executions(
        self, chosen: ExecutionFilter, *, limit: int, offset: int
    ) -> Page[Previewed]:
        """One page of executions (``Previewed``), in their key's order unless sorted."""
        now, filters = self.clock.now(), chosen.arguments(self.known)
        page = partial(_store.list_previews, limit=limit, offset=offset, preview=self.preview)
        return await self._page(
            now,
            offset,
            partial(_store.count_executions, now=now, **filters),
            partial(page, now=now, **filters),
            _store.seen_task_names,
        )

    async def execution(self, task: str, instance: str) -> Shown[Execution | None]:
        """One execution (``None`` if there is none)."""
        read = partial(
            _store.get_execution, statements=self.statements, task_name=task, instance_id=instance
        )
        return await self._shown(read)

    async def history(
        self, chosen: HistoryFilter, *, limit: int, offset: int
    ) -> Page[tuple[HistoryEntry, str | None, str | None]]:
        """One page of history entries with the start of their payload's JSON text and
        of their error, newest first unless sorted."""
        return await self._page(
            self.clock.now(),
            offset,
            partial(_store.history.count_entries, chosen=chosen),
            partial(
                _store.history.list_previews,
                chosen=chosen,
                limit=limit,
                offset=offset,
                preview=self.preview,
            ),
            _store.history.seen_task_names,
        )

    async def entry(self, history_id: int) -> Shown[tuple[HistoryEntry | None, Execution | None]]:
        """One history entry (``None`` if there is none) and the execution that has its
        key in the table now, if one does."""
        statements = self.statements

        def read(conn: Connection) -> tuple[HistoryEntry | None, Execution | None]:
            entry = _store.history.get(conn, statements, history_id)
            if entry is None:
                return None, None
            return entry, _store.get_execution(conn, statements, entry.task_name, entry.instance_id)

        return await self._shown(read)

    async def results(self, chosen: ResultFilter, *, limit: int, offset: int) -> Page[Listed]:
        """One page of kept results (``Listed``), newest first unless sorted."""
        return await self._page(
            self.clock.now(),
            offset,
            partial(_store.results.count_results, chosen=chosen),
            partial(
                _store.results.list_results,
                chosen=chosen,
                limit=limit,
                offset=offset,
                value_chars=self.result_preview,
                error_chars=self.preview,
            ),
            _store.results.seen_task_names,
        )

    async def groups(self, task: str | None, *, limit: int, offset: int) -> Page[Group]:
        """One page of groups (of ``task``'s callbacks; ``None``: all), newest first, each
        with its finished members counted by outcome."""
        return await self._page(
            self.clock.now(),
            offset,
            partial(_store.groups.count_groups, task_name=task),
            partial(_store.groups.list_groups, task_name=task, limit=limit, offset=offset),
        )

    async def group(self, group_id: int, *, limit: int, offset: int) -> Shown[GroupPage]:
        """One group with its callback as it stands and one page of its finished
        members' kept outcomes, newest first."""
        statements = self.statements
        values, errors = self.result_preview, self.preview

        def read(conn: Connection) -> GroupPage:
            group = _store.groups.get(conn, statements, group_id)
            if group is None:
                return GroupPage(group=None, callback=None, kept=None, members=[])
            execution = kept = None
            name, instance = group.task_name, group.instance_id
            if name is not None and instance is not None:
                execution = _store.get_execution(conn, statements, name, instance)
                if execution is None or execution.awaits != group.id:
                    found = _store.results.list_results(
                        conn,
                        statements,
                        ResultFilter(task=name, instance=instance),
                        limit=1,
                        value_chars=values,
                        error_chars=errors,
                    )
                    kept = found[0] if found else None
            members = (
                _store.groups.list_members(
                    conn,
                    statements,
                    group.id,
                    limit=limit,
                    offset=offset,
                    value_chars=values,
                    error_chars=errors,
                )
                if offset < sum(group.outcomes.values())
                else []
            )
            return GroupPage(group=group, callback=execution, kept=kept, members=members)

        return await self._shown(read)

    async def activity(self, *, step_minutes: int, points: int, task: str | None) -> Activity:
        """The last ``points`` steps of ``step_minutes`` of finished executions, of
        ``task`` or all (see ``_store.stats.activity``)."""
        read = partial(
            _store.stats.activity,
            statements=self.statements,
            now=self.clock.now(),
            step_minutes=step_minutes,
            points=points,
            task=task,
        )
        return await self.read_db.run(read, read_only=True)

    async def bulk_count(
        self, action: str, chosen: ExecutionFilter | HistoryFilter
    ) -> Shown[tuple[int, frozenset[str]]]:
        """How many rows the bulk ``action`` would change for ``chosen``, and the paused
        tasks, read on the primary, where the action will count them again."""

        def read(conn: Connection) -> tuple[int, frozenset[str]]:
            count = bulk_count(conn, self.statements, self.scheduler, action, chosen)
            return count, self.scheduler.paused_tasks(conn)

        return await self._shown(read, primary=True)
