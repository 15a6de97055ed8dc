"""Stop requests: how this process learns that ``cancel`` asked it to stop an execution it
holds, and when a stopped handler's grace is up.

``cancel`` on a running execution records a stop request on its row
(``stop_requested_at``, in the caller's transaction). The process holding it learns of it
(``Stops.learn``):

- through NOTIFY on PostgreSQL: the listener hears the request's notice as it commits;
- from a ``cancel`` made in this process, as its transaction commits
  (``Runner.stop_on_commit``);
- elsewhere, and while no NOTIFY reaches this process (``listen`` off, behind a pooler
  without ``listen_url``, a LISTEN connection down), by a read of its own: twice a second
  while it holds executions, and only then, one indexed query for its picked rows that
  carry a stop request (``_store.stop_requests``).

``Workers.stop`` carries a request out: an execution still queued is recorded
``cancelled`` without running; a running handler sees ``ctx.cancelled`` set, and an
async one is cancelled. ``Stops`` then gives the handler ``cancel_grace``: one still
running after it is recorded ``cancelled`` anyway (``Workers.give_up``), logged by name,
and whatever it comes to later is discarded.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial

import anyio

from sqla_scheduler import _store
from sqla_scheduler._durations import format_duration
from sqla_scheduler._execution import Key
from sqla_scheduler._runner.failures import Failures
from sqla_scheduler._runner.held import Held, HeldSet
from sqla_scheduler._runner.service import Parts, Service

__all__ = ["EARLY", "INTERVAL", "Stops", "log_cancelled", "stopped_by"]

log = logging.getLogger("sqla_scheduler")

#: How often the stop requests are read where no NOTIFY brings them, in seconds: a request
#: reaches the process that holds its execution well within a second of its commit.
INTERVAL = 0.5

#: How long a request for an execution not held (yet) is kept, in seconds: the notice of a
#: request made just after a pick may come before this process holds what it picked.
EARLY = 5.0


class Stops(Service):
    """The stop requests of the executions this process holds: learned (``learn``), read
    where no NOTIFY brings them (``read``), carried out by ``carry_out``, and given up on
    by ``give_up`` once their ``cancel_grace`` is up."""

    def __init__(
        self,
        parts: Parts,
        *,
        held: HeldSet,
        carry_out: Callable[[Key, int | None], Held | None],
        give_up: Callable[[Held], Awaitable[None]],
        hearing: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(parts)
        self.held = held
        #: Carries out a request (``Workers.stop``): the execution whose handler now has
        #: its grace, or ``None``.
        self._carry_out = carry_out
        #: Records a handler still running after its grace cancelled (``Workers.give_up``).
        self._give_up = give_up
        #: Whether NOTIFY reaches this process (the listener hears), so that no read is due.
        self._hearing = hearing
        self._grace = parts.config.cancel_grace.total_seconds()
        #: When each stopped handler's grace is up (``time.monotonic``).
        self._deadlines: dict[Held, float] = {}
        #: Requests for executions not held when they came, until when they are kept.
        self._early: dict[Key, float] = {}
        self._changed = anyio.Event()
        #: Whether NOTIFY reached this process at the last look (see ``_due``).
        self._heard = False
        self._failures = Failures("reading the stop requests of the executions held")
        #: How many reads ran (for tests and the cost stated in the docs).
        self.reads = 0

    def learn(self, key: Key, version: int | None = None) -> None:
        """``cancel`` asked to stop the execution ``key`` (at ``version``, when the read
        says): carry it out, and count its handler's grace from now (from the loop's own
        thread)."""
        held = self._carry_out(key, version)
        if held is not None:
            self._deadlines[held] = time.monotonic() + self._grace
            self._changed.set()
        elif self.held.get(key) is None:  # not held yet, maybe: see ``EARLY``
            self._early[key] = time.monotonic() + EARLY

    async def run(self) -> None:
        """Look every ``INTERVAL`` (sooner for a grace that is up first) until cancelled."""
        while True:
            with anyio.move_on_after(self._wait()):
                await self._changed.wait()
            self._changed = anyio.Event()
            await self.run_once()

    async def run_once(self) -> None:
        """Learn what came early, give up on the handlers whose grace is up, and read the
        requests when no NOTIFY brings them."""
        self._retry_early()
        await self._expire()
        if self._due():
            await self._failures.attempt(self.read)

    async def read(self) -> None:
        """Read the requests for the executions this process holds, and learn them."""
        self.reads += 1
        found = await self.db.run(
            partial(
                _store.stop_requests, statements=self.statements, picker=self.config.scheduler_name
            ),
            autocommit=True,
            read_only=True,
        )
        for task_name, instance_id, version in found:
            self.learn((task_name, instance_id), version)

    def _due(self) -> bool:
        """Whether to read: while this process holds executions whose handler has not
        finished, and no NOTIFY reaches it or it has only just come back (what was sent
        while it was away is read once)."""
        hearing = self._hearing()
        heard, self._heard = self._heard, hearing
        return self.held.outstanding > 0 and not (hearing and heard)

    def _wait(self) -> float:
        """Seconds until the next look: ``INTERVAL``, or until the first grace is up."""
        if not self._deadlines:
            return INTERVAL
        return max(0.0, min(INTERVAL, min(self._deadlines.values()) - time.monotonic()))

    def _retry_early(self) -> None:
        now = time.monotonic()
        for key, until in list(self._early.items()):
            if until < now or self.held.get(key) is not None:
                del self._early[key]
                if until >= now:
                    self.learn(key)

    async def _expire(self) -> None:
        """Give up on each stopped handler still running when its grace is up."""
        now = time.monotonic()
        for held, deadline in list(self._deadlines.items()):
            if held.completing or held.lost or not self.held.holds(held):
                del self._deadlines[held]  # it stopped: its outcome is on its way
            elif deadline <= now:
                del self._deadlines[held]
                log.warning(
                    "%s: its handler still runs %s after cancel asked it to stop "
                    "(cancel_grace); recording it cancelled, what the handler returns "
                    "will be discarded",
                    held.label,
                    format_duration(self.config.cancel_grace),
                )
                await self._give_up(held)


def stopped_by(error: BaseException | None) -> str:
    """How a handler asked to stop ended: by returning, or by raising ``error``."""
    return "by returning" if error is None else f"by raising {type(error).__name__}"


def log_cancelled(held: Held) -> None:
    """Say that ``held`` was recorded ``cancelled`` at ``cancel``'s request."""
    log.info("%s: cancelled, as cancel asked", held.label)
