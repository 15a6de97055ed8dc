"""The stats service: adds this process's per-minute counts to the stats table.

The completer counts each outcome it committed in the service's ``Tally`` (in memory, no
I/O); every ``FLUSH_INTERVAL`` the service adds them to the table (``run_once``: one
upsert statement, in a transaction of its own, never in an outcome's), and once more as
the loop stops. A process killed loses what it counted since its last flush; a flush that
fails keeps its counts for the next one.
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial

import anyio

from sqla_scheduler import _store
from sqla_scheduler._execution import Execution
from sqla_scheduler._runner.service import Parts, Service
from sqla_scheduler._store.stats import Tally

__all__ = ["FLUSH_INTERVAL", "StatsWriter"]

log = logging.getLogger("sqla_scheduler")

#: Seconds between two flushes of the counts: what a ``kill -9`` can lose at most.
FLUSH_INTERVAL = 5.0


class StatsWriter(Service):
    """Owns this process's ``Tally``: counts outcomes into it, and adds it to the table."""

    def __init__(self, parts: Parts) -> None:
        super().__init__(parts)
        #: This process's ``scheduler_name``: the ``node`` of the rows it writes.
        self.node = parts.config.scheduler_name
        self._tally = Tally()

    def __len__(self) -> int:
        """How many rows' worth of counts wait for the next flush."""
        return len(self._tally)

    def count(
        self,
        execution: Execution,
        outcome: str,
        finished_at: datetime,
        started_at: datetime | None,
    ) -> None:
        """Count ``execution``'s committed ``outcome`` (see ``Tally.count``)."""
        self._tally.count(
            task_name=execution.task_name,
            outcome=outcome,
            finished_at=finished_at,
            due=execution.execution_time,
            started_at=started_at,
        )

    async def run(self) -> None:
        """Flush every ``FLUSH_INTERVAL`` until cancelled; a failed flush is retried."""
        while True:
            await anyio.sleep(FLUSH_INTERVAL)
            try:
                await self.run_once()
            except Exception:
                log.warning("could not add the execution counts; retrying", exc_info=True)

    async def run_once(self) -> int:
        """Add what was counted since the last flush to the table; return how many rows
        that touched. What fails to commit is kept for the next flush."""
        rows = self._tally.take()
        if not rows:
            return 0
        try:
            await self.db.shielded(
                partial(_store.stats.add, statements=self.statements, node=self.node, rows=rows)
            )
        except BaseException:
            self._tally.put_back(rows)
            raise
        return len(rows)

    async def flush(self) -> None:
        """``run_once`` as a loop stops (or ``run_due`` returns): a failure is logged,
        losing those counts, and does not fail the stop."""
        try:
            await self.run_once()
        except Exception:
            log.warning("could not add the last execution counts", exc_info=True)
