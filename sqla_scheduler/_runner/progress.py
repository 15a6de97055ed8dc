"""The progress writer: writes what running handlers report, at most once a second each.

``ctx.report_progress`` hands its checked report to ``ProgressReports.report``, which
keeps the latest of each held execution in memory (from a handler thread too) and nothing
more: no statement, no wait. Every second the ``ProgressWriter`` takes the reports made
since its last write and writes them, each guarded by the version this process holds
(``_store.report_progress``), in one statement. While no handler reports, each second
costs one look at an empty dict.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial

import anyio

from sqla_scheduler import _store
from sqla_scheduler._runner.failures import Failures
from sqla_scheduler._runner.held import Held, HeldSet
from sqla_scheduler._runner.service import Parts, Service

__all__ = ["INTERVAL", "ProgressReports", "ProgressWriter"]

INTERVAL = 1.0
"""Seconds between two writes of the reports: the most often one execution's is written."""

Report = tuple[float | None, str | None]


class ProgressReports:
    """The latest report of each held execution, not yet written."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._latest: dict[Held, Report] = {}

    def reporter(self, held: Held) -> Callable[[float | None, str | None], None]:
        """What ``held``'s context calls with each checked report."""
        return partial(self.report, held)

    def report(self, held: Held, fraction: float | None, message: str | None) -> None:
        """Keep ``held``'s latest report, replacing one not yet written."""
        with self._lock:
            self._latest[held] = (fraction, message)

    def take(self) -> dict[Held, Report]:
        """The reports made since the last ``take``; none are kept."""
        with self._lock:
            latest, self._latest = self._latest, {}
        return latest

    def __bool__(self) -> bool:
        return bool(self._latest)


class ProgressWriter(Service):
    """Writes the held executions' latest progress reports every ``INTERVAL`` seconds."""

    def __init__(self, parts: Parts, *, held: HeldSet) -> None:
        super().__init__(parts)
        self.held = held
        #: What the contexts report to.
        self.reports = ProgressReports()
        self._failures = Failures("the progress of the executions held")

    async def run(self) -> None:
        """Write every ``INTERVAL`` seconds until cancelled."""
        while True:
            await anyio.sleep(INTERVAL)
            if self.reports:
                await self.run_once()

    async def run_once(self) -> int:
        """Write the reports made since the last write; return how many were written.

        The reports of executions finished or lost meanwhile are dropped. It runs apart
        from this process's other writes of its held rows (``RowWrites``), as a
        heartbeat does; a failure to write is logged, and those reports are dropped (the
        next ones are written).
        """
        async with self.held.writes.heartbeat():
            reports = [
                (held.execution, fraction, message)
                for held, (fraction, message) in self.reports.take().items()
                if self.held.holds(held) and not held.lost and not held.completing
            ]
            if not reports:
                return 0
            write = partial(
                _store.report_progress,
                statements=self.statements,
                reports=reports,
                now=self.clock.now(),
            )
            try:
                await self.db.shielded(write)
            except Exception as exc:
                self._failures.failed(exc)
                return 0
        self._failures.worked()
        return len(reports)
