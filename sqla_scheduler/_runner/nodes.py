"""The node service: this scheduler's row in the nodes table, where others see it alive.

The loop records the scheduler when it starts (``run_once``), again every
``node_heartbeat_interval`` (``run``), and removes the row once a clean stop has handed
back every execution (``remove``). The row holds that interval: a row left behind by a
killed process stops being refreshed, and after three of its intervals readers call it
stale, whatever their own configuration. Writing the row is
bookkeeping for observers: a failure is logged and retried at the next beat, and never
stops the scheduler.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import socket
from datetime import datetime
from functools import cache, partial

import anyio

from sqla_scheduler import _store
from sqla_scheduler._runner.failures import Failures
from sqla_scheduler._runner.held import HeldSet
from sqla_scheduler._runner.service import Parts, Service

__all__ = ["NodeHeartbeater"]

log = logging.getLogger("sqla_scheduler")

#: The longest host name and version the nodes table holds.
_MAX_HOST = 255
_MAX_VERSION = 50


@cache
def library_version() -> str:
    """The installed sqla-scheduler's version, as ``sqla-scheduler --version`` prints it."""
    try:
        return importlib.metadata.version("sqla-scheduler")[:_MAX_VERSION]
    except importlib.metadata.PackageNotFoundError:  # imported from a checkout, not installed
        return "unknown"


class NodeHeartbeater(Service):
    """Records this scheduler in the nodes table, and removes it on a clean stop."""

    def __init__(self, parts: Parts, *, held: HeldSet) -> None:
        super().__init__(parts)
        self.held = held
        #: The config's ``scheduler_name``, ``concurrency`` and ``node_heartbeat_interval``.
        self.name = parts.config.scheduler_name
        self.concurrency = parts.config.concurrency
        self.interval = parts.config.node_heartbeat_interval
        self._failures = Failures(f"recording scheduler {self.name!r} in the nodes table")
        self.host = socket.gethostname()[:_MAX_HOST]
        self.pid = os.getpid()
        #: When this scheduler first recorded itself; its row is removed only if it is
        #: still the one written since then.
        self.started_at: datetime | None = None

    async def run(self) -> None:
        """Record the scheduler every ``interval`` until cancelled."""
        while True:
            await anyio.sleep(self.interval.total_seconds())
            await self.run_once()

    async def run_once(self) -> bool:
        """Write this scheduler's row, last seen now; return whether it was written.

        The first call is the start record: it sets ``started_at``.
        """
        now = self.clock.now()
        if self.started_at is None:
            self.started_at = now
        node = _store.nodes.Record(
            name=self.name,
            host=self.host,
            pid=self.pid,
            started_at=self.started_at,
            last_seen=now,
            concurrency=self.concurrency,
            running=self.held.running,
            version=library_version(),
            heartbeat_interval_ms=round(self.interval.total_seconds() * 1000),
        )
        try:
            await self.db.shielded(
                partial(_store.nodes.record, statements=self.statements, node=node), autocommit=True
            )
        except Exception as exc:
            self._failures.failed(exc)
            return False
        self._failures.worked()
        return True

    async def remove(self) -> bool:
        """Delete this scheduler's row (a clean stop); return whether it was there."""
        if self.started_at is None:
            return False  # never recorded
        try:
            return await self.db.shielded(
                partial(
                    _store.nodes.remove,
                    statements=self.statements,
                    name=self.name,
                    started_at=self.started_at,
                ),
                autocommit=True,
            )
        except Exception:
            log.warning(
                "could not remove scheduler %r from the nodes table; it shows as stale "
                "three node_heartbeat_intervals from now",
                self.name,
                exc_info=True,
            )
            return False
