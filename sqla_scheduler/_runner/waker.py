"""Wake-ups: the local ``Waker`` the picker waits on (for a wake-up or for the earliest
execution time it knows of), and the LISTEN service.

Words kept apart: to *wake* is local (an event in this process); to *notify* is
PostgreSQL's NOTIFY, which the ``Listener`` turns into a wake-up.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from functools import partial

import anyio
import anyio.to_thread
from sqlalchemy import Table

from sqla_scheduler._bridge import Database
from sqla_scheduler._dialects import notify_channel, read_notice, read_pause_notice
from sqla_scheduler._threads import call_soon_threadsafe
from sqla_scheduler.clock import Clock

__all__ = ["AHEAD", "Listener", "Waker"]

log = logging.getLogger("sqla_scheduler")

#: How long before the earliest time it knows of the picker wakes and picks what is due by
#: then, so that the pick's own cost (a round trip and a commit, a few milliseconds after
#: an idle spell) is spent before the time, not after it. The executor holds an execution
#: picked ahead until its time.
AHEAD = timedelta(milliseconds=10)

#: How often the listener thread looks up from its socket to see whether to stop.
_LISTEN_TICK = 0.25


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

    def wake_at(self, at: datetime) -> None:
        """Learn that an execution is due at ``at``; end the current wait if that is
        earlier than what the wait is for (from the loop's own thread): at once if it is
        due already, else only so that the wait is for the new time (``retimed``)."""
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


class Listener:
    """LISTENs on the table's channel and wakes the picker on each notification (or, for
    work due later, tells it the time; for a pause or a resume, ``on_pause``).

    The connection is psycopg's own, in a thread: SQLAlchemy has no notification API.
    While it is down, the picker's poll is all there is, and it reconnects with backoff.
    """

    def __init__(
        self,
        db: Database,
        table: Table,
        waker: Waker,
        *,
        names: Collection[str],
        wants_work: Callable[[], bool],
        polling_interval: timedelta,
        prepared_statements: bool,
        on_pause: Callable[[str, bool], None] = lambda task_name, paused: None,
    ) -> None:
        self.db = db
        self.table = table
        self.waker = waker
        self._names = frozenset(names)
        self._wants_work = wants_work
        self._on_pause = on_pause
        self._polling_interval = polling_interval
        self._prepared = prepared_statements
        self._stop = threading.Event()

    def stop(self) -> None:
        """Stop listening (from any thread); ``run`` returns within a tick."""
        self._stop.set()

    async def run(self) -> None:
        """Keep a LISTEN connection; when it fails, poll until it is back."""
        backoff = 0.5
        while not self._stop.is_set():
            connected = threading.Event()
            try:
                await anyio.to_thread.run_sync(self.run_once, connected, abandon_on_cancel=True)
            except Exception:
                log.warning(
                    "the LISTEN connection failed; polling every %s until it is back",
                    self._polling_interval,
                    exc_info=True,
                )
            if connected.is_set():
                backoff = 0.5
            if self._stop.is_set():
                return
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    def run_once(self, connected: threading.Event) -> None:
        """One LISTEN connection, from connect to failure or ``stop`` (a worker thread)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(**self.db.connect_args(), autocommit=True) as conn:
            if not self._prepared:
                conn.prepare_threshold = None
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(notify_channel(self.table))))
            connected.set()
            # Anything scheduled while nobody was listening is picked up now.
            self.waker.soon(self.waker.news)
            while not self._stop.is_set():
                for notice in conn.notifies(timeout=_LISTEN_TICK, stop_after=1):
                    if not self._stop.is_set():
                        # Not anyio.from_thread.run_sync: a task per notice and a wait for
                        # it cost the start of the work a quarter of a millisecond.
                        self.waker.soon(partial(self._on_notify, notice.payload))

    def _on_notify(self, payload: str) -> None:
        """Work due now wakes the picker if it wants work; work due later is a time to wait
        for (a wake-up only if it is earlier than the one it waits for). Work of tasks this
        scheduler does not run is none of its business. A pause or a resume of one of its
        tasks goes to ``on_pause``; a resume is news of work too."""
        pause = read_pause_notice(payload)
        if pause is not None:
            task, paused = pause
            if task not in self._names:
                return
            self._on_pause(task, paused)
            if paused:
                return
            at = None
        else:
            task, at = read_notice(payload)
        if task not in self._names:
            return
        self.waker.heard()
        if at is not None:
            self.waker.wake_at(at)
        elif self._wants_work():
            self.waker.wake()
