"""The due-time read: how a scheduler on a database without NOTIFY (MariaDB, SQLite
across processes) learns of work another process committed, within about a second rather
than at its next poll.

Once a second while the picker would take work, one indexed query reads the earliest
time among the unpicked executions of this scheduler's tasks that are not paused
(``_store.next_due`` from the start of time). An earlier time than the picker waits for,
or one already due, wakes it (``Waker.wake_at``). A busy picker is not read for: it
picks again as soon as it has room. Work this process commits wakes it at once without a
read (``Loop.wake_on_commit``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from datetime import timedelta
from functools import partial

import anyio

from sqla_scheduler import _store
from sqla_scheduler._checks import EARLIEST
from sqla_scheduler._runner.failures import Failures
from sqla_scheduler._runner.service import Parts, Service
from sqla_scheduler._runner.waker import Waker

__all__ = ["DUE_READ_INTERVAL", "DueTimeReader"]

log = logging.getLogger("sqla_scheduler")

#: How often an idle scheduler without NOTIFY reads the earliest due time.
DUE_READ_INTERVAL = timedelta(seconds=1)


class DueTimeReader(Service):
    """Reads the earliest due time every ``interval`` while ``wants_work``, and tells the
    ``waker`` of one earlier than it knows."""

    def __init__(
        self,
        parts: Parts,
        waker: Waker,
        *,
        names: Collection[str],
        wants_work: Callable[[], bool],
        interval: timedelta = DUE_READ_INTERVAL,
    ) -> None:
        super().__init__(parts)
        self.waker = waker
        self._names = sorted(names)
        self._wants_work = wants_work
        self._interval = interval.total_seconds()
        #: How many reads ran (for tests and the cost stated in the docs).
        self.reads = 0

    async def run(self) -> None:
        """Read every ``interval`` until cancelled; a failed read is logged and the next
        one tried as usual (the picker's poll goes on regardless)."""
        failures = Failures("reading the earliest due time")
        while True:
            await anyio.sleep(self._interval)
            if self._wants_work():
                await failures.attempt(self.read)

    async def read(self) -> None:
        """One read: wake the picker for a time earlier than it waits for."""
        self.reads += 1
        earliest = await self.db.run(
            partial(_store.next_due, statements=self.statements, names=self._names, now=EARLIEST),
            autocommit=True,
            lane="due-times",
            read_only=True,
        )
        known = self.waker.next_at
        if earliest is not None and (known is None or earliest < known):
            self.waker.wake_at(earliest)
