"""The heartbeater: keeps the executions this process holds alive.

Every ``heartbeat_interval`` it refreshes the heartbeat of each held execution in one
statement (``run_once``). An execution whose version moved meanwhile was revived by
another scheduler: it is flagged lost, and its outcome will not be committed.
"""

from __future__ import annotations

import logging
from functools import partial

import anyio

from sqla_scheduler import _store
from sqla_scheduler._runner.failures import Failures
from sqla_scheduler._runner.held import HeldSet, versioned_keys
from sqla_scheduler._runner.service import Parts, Service

__all__ = ["Heartbeater"]

log = logging.getLogger("sqla_scheduler")


class Heartbeater(Service):
    """Refreshes held executions' heartbeats; flags the ones lost elsewhere."""

    def __init__(self, parts: Parts, *, held: HeldSet) -> None:
        super().__init__(parts)
        self.held = held
        #: How often it beats: the config's ``heartbeat_interval``.
        self.interval = parts.config.heartbeat_interval
        self._failures = Failures("the heartbeat of the executions held")

    async def run(self) -> None:
        """Beat every ``interval`` until cancelled."""
        while True:
            await anyio.sleep(self.interval.total_seconds())
            await self.run_once()

    async def run_once(self) -> int:
        """Refresh every held execution's heartbeat; return how many were refreshed.

        A failure to write is logged and retried at the next beat: one missed beat is
        within ``missed_heartbeat_limit``.
        """
        if not any(not h.lost and not h.completing for h in self.held):
            return 0
        async with self.held.writes.heartbeat():  # no start record or commit beside it
            snapshot = [h for h in self.held if not h.lost and not h.completing]
            keys = versioned_keys(snapshot)
            try:
                refreshed = await self.db.shielded(
                    partial(
                        _store.heartbeat,
                        statements=self.statements,
                        held=keys,
                        now=self.clock.now(),
                    ),
                    autocommit=True,
                )
            except Exception as exc:
                self._failures.failed(exc)
                return 0
        self._failures.worked()
        for held in snapshot:
            if held.key not in refreshed and not held.completing and self.held.holds(held):
                held.lose("heartbeat")
        return len(refreshed)
