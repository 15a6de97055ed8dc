"""The picker: takes due executions from the table into this process's hands.

It keeps the number of outstanding executions (queued or running) between a lower and
an upper limit, fractions of ``concurrency``: once the count falls to the lower limit it
picks up to the upper one (``run_once``). Between picks it waits for a wake-up (a NOTIFY,
freed capacity, a commit in this process, a revival), for the earliest execution time it
knows of (``refresh_next`` asks the table after a pick that took all that was due), or
for its poll, whichever comes first.

Tasks with ``max_concurrency`` or ``rate_limit`` are picked first, in a transaction of
their own that counts each one's picked executions, or its starts in the window, under
its lock (``_store.pick_limited``); the others with one statement, as if there were no
limits at all. While a backlog of other tasks keeps the picker busy, that transaction is
skipped once it found the limited tasks with room to spare and nothing more due, until
the waker hears of work (``Waker.heard``), a time it knows of comes, or
``_LIMITED_RECHECK`` passes: so a limited task registered beside them does not slow
their picks.

A rate-limited task whose window is full is left out of the picks until its window has
room again, and the picker wakes up then (``reopens``). Its executions are counted as
started when they are picked, each to start within a slack of its pick or be handed
back (``Held.start_by``; see ``_store.rates``): beyond the free workers they are only
picked while the window keeps room to spare. In a backlog with room to spare, a pick
counts more starts ahead (``_Credit``), which the next picks take with one statement
each, without the lock; what they do not take is given back. When its due executions
wait for a free worker (``held_back``), the picker picks again as soon as one is free
rather than once its hand falls to the lower limit, so that a backlog of other work,
picked ahead, cannot keep them waiting.

Every ``polling_interval`` it also reads the paused tasks (``refresh_paused``): that is
how a process learns of a pause it cannot hear of (other processes on SQLite, a LISTEN
connection that was down), and hands back what it holds of the task.

Under a backlog of short executions the workers can drain a pick before the next one
returns; the picker then multiplies both limits (the *boost*, up to ``_MAX_BOOST``) and
falls back to the base limits once a pick finds the backlog gone.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

import anyio

from sqla_scheduler import _store
from sqla_scheduler._execution import Execution
from sqla_scheduler._runner.failures import Failures
from sqla_scheduler._runner.held import Held, HeldSet, PausedTasks
from sqla_scheduler._runner.limited import LimitedPicks, pick_plain
from sqla_scheduler._runner.service import Parts, Service
from sqla_scheduler._runner.waker import Waker

if TYPE_CHECKING:
    from sqla_scheduler.tasks import RateLimit

__all__ = ["Picker"]

log = logging.getLogger("sqla_scheduler")

#: How long the picker backs off after the database failed it.
_ERROR_BACKOFF = 1.0
#: The most the picker multiplies its lower and upper limits by under a backlog.
_MAX_BOOST = 16
#: How long, at the most, a backlog of other tasks keeps the picker from looking at
#: limited tasks it found drained when it heard of nothing new for them (seconds): work
#: it cannot hear of (other processes on SQLite) is otherwise left to its poll.
_LIMITED_RECHECK = 0.25


class Picker(Service):
    """Picks due executions and holds them; sizes each pick to the work in hand."""

    def __init__(
        self,
        parts: Parts,
        *,
        names: Sequence[str],
        held: HeldSet,
        waker: Waker,
        limits: Mapping[str, int] | None = None,
        rates: Mapping[str, RateLimit] | None = None,
        paused: PausedTasks | None = None,
        on_paused: Callable[[str], None] = lambda task_name: None,
    ) -> None:
        super().__init__(parts)
        #: Every task this scheduler runs, those with a ``max_concurrency`` (its value) and
        #: those with a ``rate_limit`` (its value).
        self.names = names
        self.limits = dict(limits or {})
        self.rates = dict(rates or {})
        self._unlimited = [n for n in names if n not in self.limits and n not in self.rates]
        #: The picks of the tasks with either limit.
        self.limited = LimitedPicks(parts, waker=waker, limits=self.limits, rates=self.rates)
        self.held = held
        self.waker = waker
        #: The tasks known to be paused, and what to call for each one newly found so.
        self.paused = paused if paused is not None else PausedTasks()
        self._on_paused = on_paused
        self._failures = Failures("picking due executions")
        self._paused_failures = Failures("reading the paused tasks")
        #: When to read the paused tasks next (``time.monotonic``): at the first pick.
        self._paused_due = 0.0
        config = parts.config
        self._base_low = max(0, math.floor(config.concurrency * config.pick_lower_fraction))
        self._base_high = max(
            config.concurrency, math.ceil(config.concurrency * config.pick_upper_fraction)
        )
        #: How many times the base limits the picker keeps now (1 without a backlog).
        self.boost = 1
        #: The last pick was full: more is due than it took.
        self.more_due = False
        #: What the last pick took what was due by (see ``Waker.due_by``).
        self.picked_by: datetime | None = None
        #: After a pick that found every limited task drained (room to spare, nothing
        #: more due): what the waker had heard of by then (``Waker.heard_of``) and when.
        self._limited_drained: tuple[int, float] | None = None

    @property
    def low(self) -> int:
        """Pick again once no more than this many executions are outstanding."""
        if self.boost == 1:
            low = self._base_low
        else:
            # Under a backlog, top up at half the upper limit: the next pick then runs
            # while the workers still have half a pick's worth to do, instead of once they
            # starve.
            low = max(self._base_low * self.boost, self.high // 2)
        if self.limited.held_back:  # as soon as a worker is free: a rate-limited task waits
            return min(low, self.config.concurrency - 1)
        return low

    @property
    def high(self) -> int:
        """Pick up to this many outstanding executions."""
        return self._base_high * self.boost

    def wants_work(self) -> bool:
        """Whether a pick now would take anything (the outstanding count is low)."""
        return self.held.outstanding <= self.low

    @property
    def backlog(self) -> bool:
        """Whether more is known to be due than the last pick took: it was full, or it left
        a rate-limited task's executions waiting for a free worker."""
        return self.more_due or self.limited.held_back

    def wants_more(self) -> bool:
        """Whether more is known to be due (a full pick, or the time waited for has come)
        and there is room for it now."""
        return (self.backlog or self.waker.due()) and self.held.outstanding <= self.low

    async def run_once(self, limit: int | None = None, prompt: int | None = None) -> list[Held]:
        """Pick up to ``limit`` due executions (default: up to the upper limit); hold them.
        ``prompt``: how many of them can start at once (default: the free workers)."""
        if limit is None:
            limit = self.high - self.held.outstanding
        if prompt is None:
            prompt = self.config.concurrency - self.held.outstanding
        self.picked_by = due_by = self.waker.due_by()
        picked: list[Execution] = []
        start_by: dict[str, datetime] = {}
        limited = self.limited.now()
        if limited and limit > 0 and self._limited_may_be_due():
            heard_of, at = self.waker.heard_of, time.monotonic()
            picked, start_by, drained = await self.limited.pick(
                limited, limit, max(prompt, 0), due_by
            )
            self._limited_drained = (heard_of, at) if drained else None
        elif limit > 0:
            self.limited.skip()
        if self._unlimited and limit > len(picked):
            room = limit - len(picked)
            picked += await pick_plain(
                self.db, self.statements, self.config, self._unlimited, room, due_by
            )
        self.more_due = len(picked) == limit or self.limited.credit_spent
        if not self.more_due:
            self.boost = 1
        elif (
            self.held.running < self.config.concurrency
            and self.held.outstanding == self.held.running
        ):
            # The queue ran dry while we picked: keep more in hand next time.
            self.boost = min(self.boost * 2, _MAX_BOOST)
        return [self.held.hold(e, start_by=start_by.get(e.task_name)) for e in picked]

    def _limited_may_be_due(self) -> bool:
        """Whether the limited tasks may have work to pick: always, but while a backlog
        (the last pick was full) follows a pick that found them drained, and the waker has
        heard of no work since, no time it knows of has come, and ``_LIMITED_RECHECK``
        has not passed."""
        if self._limited_drained is None or not self.more_due:
            return True
        heard_of, at = self._limited_drained
        return (
            heard_of != self.waker.heard_of
            or self.waker.due()
            or time.monotonic() - at >= _LIMITED_RECHECK
        )

    async def refresh_next(self) -> None:
        """Ask the table for the earliest execution time after the last pick's among this
        scheduler's tasks, and wait for it (see ``Waker``). After the pick's, not after
        now: what came due since the pick is found too, and picked at once."""
        self.waker.begin_refresh()
        after = self.picked_by or self.clock.now()
        next_at = await self.db.shielded(
            partial(_store.next_due, statements=self.statements, names=self.names, now=after),
            autocommit=True,
            lane="picker",
            plan_once=True,
        )
        if next_at is not None:
            self.waker.wake_at(next_at)
        self.limited.wake_at_reopen()  # the table knows nothing of it

    async def refresh_paused(self) -> None:
        """Read the paused tasks from the table; hand back what is held of each one that
        was not known to be paused (``on_paused``)."""
        self._paused_due = time.monotonic() + self.config.polling_interval.total_seconds()
        names: frozenset[str] | None = None
        self.paused.begin_refresh()
        try:
            names = await self.db.run(
                partial(_store.control.paused, statements=self.statements),
                autocommit=True,
                lane="picker",
                read_only=True,  # no write lock on SQLite
                plan_once=True,  # as the lane's picks: the first to open it configures it
            )
        finally:
            newly = self.paused.end_refresh(names)
        for task_name in sorted(newly):
            self._on_paused(task_name)

    def recheck_paused(self) -> None:
        """Read the paused tasks again before the next pick (a pick took an execution of
        a task known to be paused: the pause is newer than the pick, or the resume went
        unheard), and wake up for it."""
        self._paused_due = 0.0
        self.waker.wake()

    def _paused_wait(self, at_most: float | None) -> float:
        """``at_most`` seconds (``None``: no limit), but no later than the next read of the
        paused tasks: a full hand must not keep this process from learning of a pause."""
        until = max(0.0, self._paused_due - time.monotonic())
        return until if at_most is None else min(at_most, until)

    async def run(
        self, deliver: Callable[[list[Held]], Awaitable[None]], stopping: Callable[[], bool]
    ) -> None:
        """Pick and ``deliver`` to the workers whenever work is wanted, until ``stopping``."""
        poll = self.config.polling_interval.total_seconds()
        pick = True
        while not stopping():
            self.waker.arm()
            if time.monotonic() >= self._paused_due:
                try:
                    await self.refresh_paused()
                except Exception as exc:
                    self._paused_failures.failed(exc)
                else:
                    self._paused_failures.worked()
            if pick and self.wants_work():
                try:
                    await deliver(await self.run_once())
                    if not self.more_due and self.waker.stale():
                        await self.refresh_next()
                except Exception as exc:
                    self._failures.failed(exc)
                    await anyio.sleep(_ERROR_BACKOFF)
                    continue
                self._failures.worked()
                if self.wants_more():
                    continue  # handlers already drained the queue: pick again at once
            pick = True
            if not self.wants_work() and (self.backlog or self.waker.due()):
                # more is due than there is room for: the workers and the completer wake
                # us when room is made
                await self.waker.wait(self._paused_wait(None if self.backlog else poll))
            elif not await self.waker.wait(self._paused_wait(self.waker.seconds_to_next(poll))):
                self.waker.known = False  # a poll: ask the table again after the pick
            elif self.waker.retimed:
                pick = False  # only told of an earlier time ahead: wait for it instead
