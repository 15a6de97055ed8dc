"""Maintenance: the cluster's housekeeping, run by every scheduler.

Before a loop starts, ``register_recurring`` creates or refreshes the recurring tasks'
rows. Every ``revive_interval`` one pass (``run_once``) measures the database clock's offset
(``sync_clock``), makes dead executions due again (``revive_once``), names the rows no
scheduler can read (``report_unreadable_once``), deletes old rows of tasks nobody
registers (``delete_orphans_once``) and prunes old history, results and per-minute
counts (``prune_history_once``, ``prune_results_once``, ``prune_stats_once``). Each step
is safe to run from many schedulers at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import anyio

from sqla_scheduler import _store
from sqla_scheduler._durations import format_duration
from sqla_scheduler._execution import Execution
from sqla_scheduler._node import FORGET_AFTER
from sqla_scheduler._runner.failures import Failures
from sqla_scheduler._runner.service import Parts, Service
from sqla_scheduler._runner.waker import Waker
from sqla_scheduler.clock import (
    STEP_TOLERANCE,
    DatabaseClock,
    ManualClock,
    steady_seconds,
)
from sqla_scheduler.listeners import dispatch
from sqla_scheduler.tasks import RecurringTask

__all__ = ["Maintenance"]

log = logging.getLogger("sqla_scheduler")

#: How many unreadable rows one pass names, and how many it remembers having named.
_UNREADABLE_PER_PASS = 100
_UNREADABLE_REMEMBERED = 10_000
#: History entries deleted per statement (one short transaction each). A pass deletes
#: batch after batch until one is not full, or until it has pruned for ``PRUNE_SHARE`` of
#: ``revive_interval``: pruning keeps up with entries written at any rate, and a backlog
#: (a retention shortened) takes several passes without holding revival up.
PRUNE_BATCH = 1000
PRUNE_SHARE = 0.5
#: The per-minute counts are kept at least this long, whatever ``history_retention``
#: says: the admin page's charts show the last day.
STATS_RETENTION = timedelta(days=1)


class Maintenance(Service):
    """Clock sync, revival of dead executions and orphan deletion."""

    def __init__(
        self,
        parts: Parts,
        *,
        names: Sequence[str],
        recurring: Sequence[RecurringTask[Any]] = (),
        waker: Waker,
    ) -> None:
        super().__init__(parts)
        self.names = names
        self.recurring = recurring
        self.waker = waker
        self._reported: set[tuple[Any, Any, tuple[str, ...]]] = set()
        #: The clock's reading and the monotonic clock's at the last revival pass, to tell
        #: a step of the clock; and until when (monotonic) revival waits after one.
        self._last_reading: tuple[datetime, float] | None = None
        self._revive_after = 0.0

    async def register_recurring(self) -> None:
        """Upsert each recurring task's row; remove those whose schedule is disabled.
        A task without a schedule has no row of its own: its instances are the
        application's.

        Run once before a loop starts (and by ``run_due``), in one transaction.
        """
        now = self.clock.now()
        plan = [
            _store.Recurring(task.name, task.first_instance(now), task.schedule.deterministic)
            for task in self.recurring
            if task.schedule is not None
        ]
        if plan:
            await self.db.shielded(
                partial(_store.register_recurring, statements=self.statements, tasks=plan, now=now)
            )

    async def run(self) -> None:
        """A pass every ``revive_interval`` until cancelled; a failed pass is retried."""
        interval = self.config.revive_interval.total_seconds()
        # housekeeping can wait for a busy database (SQLite's write lock under load)
        failures = Failures("maintenance", quiet=self.db.backend.busy)
        while True:
            began = steady_seconds()
            await failures.attempt(self.run_once)
            # every interval, however long the pass took (pruning may take half of it)
            await anyio.sleep(max(0.0, began + interval - steady_seconds()))

    async def run_once(self) -> None:
        """One pass: clock sync, revival, orphan deletion when tasks are registered,
        history, results and per-minute counts pruning, and forgetting nodes long dead."""
        await self.sync_clock()
        await self.revive_once()
        await self.report_unreadable_once()
        if self.names:  # with no tasks, every row would look orphaned
            await self.delete_orphans_once()
        until = self._prune_deadline()
        await self.prune_history_once(until=until)
        await self.prune_results_once(until=until)
        await self.prune_stats_once(until=until)
        await self.forget_nodes_once()

    async def sync_clock(self) -> None:
        """Measure a ``DatabaseClock``'s offset when it is due (a no-op for others)."""
        clock = self.clock
        if isinstance(clock, DatabaseClock) and clock.due():
            offset = await self.db.shielded(clock.measure)
            if abs(offset) > timedelta(seconds=1):
                log.info(
                    "this machine's clock is %+.3fs off the database's; corrected",
                    -offset.total_seconds(),
                )

    async def revive_once(self) -> list[Execution]:
        """Make executions whose heartbeat went stale due again; return them as found.

        Nothing is revived for ``dead_after`` after this scheduler's clock stepped (see
        ``_clock_stepped``)."""
        now = self.clock.now()
        if self._clock_stepped(now) or steady_seconds() < self._revive_after:
            return []
        revived = await self.db.shielded(
            partial(
                _store.revive,
                statements=self.statements,
                threshold=now - self.config.dead_after,
                now=now,
                history=self.config.history,
            ),
            # the revival and its history entries commit together
            autocommit=self.config.history == "none",
        )
        for execution in revived:
            log.warning(
                "revived dead execution %s/%s (picked by %r, last heartbeat %s)",
                execution.task_name,
                execution.instance_id,
                execution.picked_by,
                execution.last_heartbeat.isoformat() if execution.last_heartbeat else "never",
            )
            dispatch(self.listeners, "on_dead_execution", execution)
        if revived:
            self.waker.news()
        return revived

    def _clock_stepped(self, now: datetime) -> bool:
        """Whether the clock moved apart from the monotonic clock since the last pass by
        more than ``STEP_TOLERANCE``; if so, hold revival back for ``dead_after``.

        A ``DatabaseClock`` does not step with the machine's clock, but a ``SystemClock``
        (SQLite's default: one machine, whose clock is the database's) steps with it, and
        so do the heartbeats that live schedulers write: an hour forward, every heartbeat
        written before looks an hour old. Once ``dead_after`` has passed every live holder
        has written one on the new time, and what is still stale is dead. A
        ``ManualClock`` is moved by tests to make executions dead: it is taken as it
        reads."""
        steady = steady_seconds()
        last, self._last_reading = self._last_reading, (now, steady)
        if last is None or isinstance(self.clock, ManualClock):
            return False
        drift = (now - last[0]) - timedelta(seconds=steady - last[1])
        if abs(drift) <= STEP_TOLERANCE:
            return False
        self._revive_after = steady + self.config.dead_after.total_seconds()
        log.warning(
            "this scheduler's clock stepped by %+.3fs; reviving nothing for %s, until live "
            "schedulers have beaten on the new time",
            drift.total_seconds(),
            format_duration(self.config.dead_after),
        )
        return True

    async def report_unreadable_once(self) -> None:
        """Take each row due or picked that no scheduler can load out of rotation: into
        history as ``undecodable``, with every column's raw value, and log it by task,
        instance and column. With ``history = "none"`` such a row stays in the table (picks,
        revivals and listings leave it out) and is logged once per process and problem."""
        now = self.clock.now()
        found = await self.db.shielded(
            partial(
                _store.find_unreadable,
                statements=self.statements,
                now=now,
                limit=_UNREADABLE_PER_PASS,
            ),
            autocommit=True,
        )
        if len(self._reported) > _UNREADABLE_REMEMBERED:
            self._reported.clear()
        for name, instance, columns in found:
            problem = (
                f"{', '.join(columns)} {'holds a value' if len(columns) == 1 else 'hold values'}"
                " not what the scheduler writes there"
            )
            if self.config.history != "none":
                error = f"cannot read {name}/{instance}: {problem}; the row as it was: "
                moved = await self.db.shielded(
                    partial(
                        _store.history.move_undecodable,
                        statements=self.statements,
                        task_name=name,
                        instance_id=instance,
                        now=now,
                        error=error,
                    )
                )
                if moved:
                    log.error(
                        "cannot read %s/%s: %s; took it out of the table into history as "
                        "undecodable, with its raw values",
                        name,
                        instance,
                        problem,
                    )
                continue
            key = (name, instance, tuple(columns))
            if key in self._reported:
                continue
            self._reported.add(key)
            log.error(
                "cannot read %s/%s: %s; the row is not picked, revived or listed until it is "
                "fixed or cancelled",
                name,
                instance,
                problem,
            )

    async def delete_orphans_once(self) -> list[tuple[str, str, Any]]:
        """Delete rows of unknown tasks older than ``delete_unresolved_after``."""
        if not self.names:
            raise RuntimeError(
                "this scheduler registers no tasks, so every task name would look orphaned; "
                "delete orphans from a scheduler that registers the application's tasks"
            )
        threshold = self.clock.now() - self.config.delete_unresolved_after
        deleted = await self.db.shielded(
            partial(
                _store.delete_orphans,
                statements=self.statements,
                known=self.names,
                threshold=threshold,
            ),
            autocommit=True,
        )
        for name, instance, data in deleted:
            log.warning(
                "deleted orphan %s/%s: no task of that name is registered here and it was "
                "due more than %s ago; raw payload: %r",
                name,
                instance,
                format_duration(self.config.delete_unresolved_after),
                data,
            )
        return deleted

    async def forget_nodes_once(self) -> int:
        """Delete the rows of nodes not seen for ``FORGET_AFTER`` (killed schedulers);
        return how many."""
        threshold = self.clock.now() - max(FORGET_AFTER, self.config.node_heartbeat_interval * 10)
        forgotten = await self.db.shielded(
            partial(_store.nodes.forget, statements=self.statements, threshold=threshold),
            autocommit=True,
        )
        if forgotten:
            log.info("forgot %d scheduler node(s) not seen since %s", forgotten, threshold)
        return forgotten

    async def prune_history_once(self, *, until: float | None = None) -> int:
        """Delete history entries older than ``history_retention``, ``PRUNE_BATCH`` per
        statement, until none is left or the steady clock reaches ``until`` (by default
        ``PRUNE_SHARE`` of ``revive_interval`` from now); return how many."""
        return await self._prune(
            _store.history.prune, self.config.history_retention, "history entries", until
        )

    async def prune_results_once(self, *, until: float | None = None) -> int:
        """Delete kept results older than ``result_retention``, as ``prune_history_once``
        does history entries, and the groups that ended before then (whose members'
        results go with them); return how many results."""
        retention = self.config.result_retention
        until = self._prune_deadline() if until is None else until
        pruned = await self._prune(_store.results.prune, retention, "results", until)
        await self._prune(_store.groups.prune, retention, "groups", until)
        return pruned

    async def prune_stats_once(self, *, until: float | None = None) -> int:
        """Delete the per-minute counts of minutes older than ``history_retention`` (a day
        at least, ``STATS_RETENTION``), about ``PRUNE_BATCH`` rows per statement, as
        ``prune_history_once`` does history entries; return how many rows."""
        retention = max(self.config.history_retention, STATS_RETENTION)
        return await self._prune(_store.stats.prune, retention, "per-minute counts", until)

    def _prune_deadline(self) -> float:
        """When (steady clock) a pass's pruning stops, backlog or not."""
        return steady_seconds() + self.config.revive_interval.total_seconds() * PRUNE_SHARE

    async def _prune(
        self,
        prune_some: Callable[..., int],
        retention: timedelta,
        what: str,
        until: float | None,
    ) -> int:
        threshold = self.clock.now() - retention
        until = self._prune_deadline() if until is None else until
        prune = partial(
            prune_some, statements=self.statements, threshold=threshold, limit=PRUNE_BATCH
        )
        pruned = 0
        while True:  # at least one batch, whatever the time
            deleted = await self.db.shielded(prune, autocommit=True)
            pruned += deleted
            if deleted < PRUNE_BATCH or steady_seconds() >= until:
                break
        if pruned:
            log.info("pruned %d %s older than %s", pruned, what, threshold.isoformat())
        return pruned
