"""Wake-ups: the local ``Waker`` the picker waits on (for a wake-up or for the earliest
execution time it knows of).

Words kept apart: to *wake* is local (an event in this process); to *notify* is
PostgreSQL's NOTIFY, which the ``Listener`` (``_runner.listener``) turns into a wake-up.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import datetime, timedelta

import anyio
import anyio.to_thread

from sqla_scheduler._threads import call_soon_threadsafe
from sqla_scheduler.clock import Clock

__all__ = ["AHEAD", "Waker"]

log = logging.getLogger("sqla_scheduler")

#: How long before the earliest time it knows of the picker wakes and picks what is due by
#: then, so that the pick's own cost (a round trip and a commit, a few milliseconds after
#: an idle spell) is spent before the time, not after it. The executor holds an execution
#: picked ahead until its time.
AHEAD = timedelta(milliseconds=10)


class Waker:
    """What the picker waits for: a wake-up, or the earliest execution time it knows of.

    ``arm``, then ``wait`` until ``wake`` or until the time ``wake_at`` was told, whichever
    comes first (and ``at_most`` at the latest). A wake-up between ``arm`` and ``wait`` is
    not lost: ``wait`` then returns at once. The earliest time is forgotten once it has
    passed, and on each ``refresh`` from the table: what it says is only ever an earlier
    start, never a reason to sleep past ``at_most``.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._event = anyio.Event()
        #: Schedules a callback on the loop from any thread; set by ``bind``.
        self._call_soon: Callable[[Callable[[], None]], object] | None = None
        #: The earliest execution time known to be ahead, if any.
        self.next_at: datetime | None = None
        #: Whether ``next_at`` says all there is to know (since the last refresh).
        self.known = False
        #: Whether the current wait was ended for work due now (not only for a new time).
        self._for_now = False
        #: How many times it heard of work (``heard``): scheduled, revived, resumed, or due
        #: at a time. The picker compares counts to know whether it heard of any since.
        self.heard_of = 0

    def bind(self) -> None:
        """Let other threads wake the loop this is called on (see ``wake_soon``)."""
        self._call_soon = call_soon_threadsafe()

    def arm(self) -> None:
        """Start a new wait: only wake-ups from now on end it."""
        self._event = anyio.Event()
        self._for_now = False

    def wake(self) -> None:
        """End the current wait (from the loop's own thread)."""
        self._for_now = True
        self._event.set()

    def heard(self) -> None:
        """Count news of work (from the loop's own thread); ``news`` also wakes."""
        self.heard_of += 1

    def news(self) -> None:
        """Hear of work due now and end the current wait (from the loop's own thread)."""
        self.heard()
        self.wake()

    def wake_at(self, at: datetime, *, news: bool = True) -> None:
        """Learn that an execution is due at ``at``; end the current wait if that is
        earlier than what the wait is for (from the loop's own thread): at once if it is
        due already, else only so that the wait is for the new time (``retimed``).
        Without ``news`` it is a time the picker worked out itself (when a rate-limited
        task's window has room again), not news of work (``heard``)."""
        if news:
            self.heard()
        if self.next_at is None or at < self.next_at:
            self.next_at = at
            if at - AHEAD <= self.clock.now():
                self._for_now = True
            self._event.set()

    @property
    def retimed(self) -> bool:
        """Whether the wait ended only because an earlier time ahead was learnt: nothing
        is due yet, so there is nothing to pick."""
        return self._event.is_set() and not self._for_now

    def wake_soon(self) -> None:
        """``wake`` from any thread; nothing once the loop has ended or before it runs."""
        self.soon(self.wake)

    def wake_at_soon(self, at: datetime) -> None:
        """``wake_at`` from any thread; nothing once the loop has ended or before it runs."""
        self.soon(lambda: self.wake_at(at))

    def soon(self, fn: Callable[[], None]) -> None:
        """Call ``fn`` on the loop's own thread, from any thread, without waiting for it;
        calls run in the order they were made. Nothing once the loop has ended or before
        it runs."""
        if self._call_soon is None:
            return
        with contextlib.suppress(RuntimeError):  # the loop has ended
            self._call_soon(fn)

    def due(self) -> bool:
        """Whether the earliest time known has come (or comes within ``AHEAD``)."""
        return self.next_at is not None and self.next_at - AHEAD <= self.clock.now()

    def due_by(self) -> datetime:
        """What a pick now may take: what is due now, or by the earliest time known when
        that comes within ``AHEAD``."""
        now = self.clock.now()
        if self.next_at is not None and now < self.next_at <= now + AHEAD:
            return self.next_at
        return now

    def stale(self) -> bool:
        """Whether the picker should ask the table for the earliest time ahead: it never
        did, or the time it knew has come (see ``due``)."""
        if self.due():
            self.next_at = None
            self.known = False
        return not self.known

    def begin_refresh(self) -> None:
        """Forget the earliest time before asking the table; ``wake_at`` calls during the
        query still count."""
        self.next_at = None
        self.known = True

    def seconds_to_next(self, at_most: float) -> float:
        """How long a wait for the earliest known time may be, at most ``at_most``."""
        if self.next_at is None:
            return at_most
        ahead = (self.next_at - AHEAD - self.clock.now()).total_seconds()
        return max(0.0, min(at_most, ahead))

    async def wait(self, at_most: float | None = None) -> bool:
        """Until the current wait is ended, or ``at_most`` seconds; whether it was ended."""
        event = self._event
        with anyio.move_on_after(at_most):
            await event.wait()
        return event.is_set()
