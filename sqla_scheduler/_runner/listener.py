"""The LISTEN service (PostgreSQL): hears NOTIFYs on the table's channel and turns them
into wake-ups of the picker.

LISTEN needs a session that stays with its client, which a connection pooler in
transaction mode (PgBouncer, RDS Proxy, a pooled endpoint) does not keep: it hands the
server connection to other clients after each transaction, and notifications go astray.
So the listener can connect elsewhere than the scheduler's engine (``listen_url``: a
direct connection for LISTEN alone), and each time it connects it checks that
notifications reach it: it sends one to itself through the engine's own URL, the way
other processes' NOTIFYs come, and waits up to ``LISTEN_CHECK`` for it. When that one
does not come, it says so once, with what to do, and gives way to the due-time read
(``DueTimeReader``), as on a database without NOTIFY: work starts within about a second rather
than at the next poll.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Collection
from datetime import timedelta
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
from sqlalchemy import Table, make_url
from sqlalchemy.exc import DBAPIError

from sqla_scheduler._bridge import Database
from sqla_scheduler._dialects import (
    notice_of_check,
    notify_channel,
    read_check_notice,
    read_notice,
    read_pause_notice,
    read_stop_notice,
)
from sqla_scheduler._durations import format_duration
from sqla_scheduler._notifier import Subscription, driver_errors, notifier_for, send
from sqla_scheduler._runner.failures import Failures
from sqla_scheduler._runner.waker import Waker

__all__ = ["LISTEN_CHECK", "Listener"]

log = logging.getLogger("sqla_scheduler")

#: How long a new LISTEN connection waits for the notification it sent itself.
LISTEN_CHECK = timedelta(seconds=3)

#: How often the listener looks up to see whether to stop or check a new connection.
_LISTEN_TICK = 0.25


class Listener:
    """LISTENs on the table's channel and wakes the picker on each notification (or, for
    work due later, tells it the time; for a pause or a resume, ``on_pause``; for a stop
    request, ``on_stop``).

    The connection is the process's notifier's (``_notifier``), shared with every other
    subscriber to the same database. While it is down, the picker's poll is all there is,
    and the notifier reconnects with backoff. When notifications cannot reach it (see the
    module), ``on_deaf`` runs instead, for good.
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
        listen_url: str | None = None,
        on_deaf: Callable[[], Awaitable[None]] | None = None,
        on_pause: Callable[[str, bool], None] = lambda task_name, paused: None,
        on_stop: Callable[[str, str], None] = lambda task_name, instance_id: None,
    ) -> None:
        self.db = db
        self.table = table
        self.waker = waker
        self._names = frozenset(names)
        self._wants_work = wants_work
        self._on_pause = on_pause
        self._on_stop = on_stop
        self._polling_interval = polling_interval
        self._listen_url = listen_url
        self._on_deaf = on_deaf
        self._stop = threading.Event()
        #: Set (by the notifier's thread) when a new connection is to be checked.
        self._unchecked = threading.Event()
        #: The token of the latest check sent.
        self._token: str | None = None
        #: How many connections failed (a check of one that failed proves nothing).
        self._losses = 0
        #: Whether notifications reach the current connection (its check came back):
        #: until then, and after it fails, the scheduler's own commits wake it directly.
        self.hearing = False
        #: Whether the check failed and ``on_deaf`` took over.
        self.deaf = False
        self._failures = Failures(
            f"the LISTEN connection (polling every {format_duration(polling_interval)} meanwhile)",
            expected=(DBAPIError, *driver_errors(), OSError),
        )

    def stop(self) -> None:
        """Stop listening (from any thread); ``run`` returns within a tick."""
        self._stop.set()

    async def run(self) -> None:
        """Hear the table's channel through the process's notifier until stopped; check
        each connection it makes (see the module), and give way when one does not hear."""
        channel = notify_channel(self.table)
        notifier = notifier_for(self._connect_args(self._listen_url))
        subscription = notifier.subscribe(
            channel, self._heard, on_connected=self._connected, on_lost=self._lost
        )
        try:
            while not self._stop.is_set():
                if self._unchecked.is_set():
                    self._unchecked.clear()
                    if not await self._check(channel, subscription):
                        subscription.close()
                        self._give_way()
                        if self._on_deaf is not None:
                            await self._on_deaf()
                        return
                await anyio.sleep(_LISTEN_TICK)
        finally:
            subscription.close()
            self.hearing = False

    def _connected(self) -> None:
        """(The notifier's thread.) A new connection LISTENs: back after an outage (said
        once), anything scheduled while nobody listened is picked up, and it is checked."""
        self._failures.worked()
        self.waker.soon(self.waker.news)
        self._unchecked.set()

    def _lost(self, error: BaseException) -> None:
        """(The notifier's thread.) The connection failed; the notifier connects again."""
        self.hearing = False
        self._losses += 1
        self._failures.failed(error)

    def _heard(self, payload: str) -> None:
        """(The notifier's thread.) A NOTIFY on the table's channel: this listener's own
        check, or news for the picker."""
        check = read_check_notice(payload)
        if check is not None:
            if check == self._token and not self.hearing:
                self.hearing = True
                if self._listen_url is None:  # the engine's URL keeps sessions
                    self.db.sessions_kept()
        elif not self._stop.is_set():
            # Not anyio.from_thread.run_sync: a task per notice and a wait for it cost the
            # start of the work a quarter of a millisecond.
            self.waker.soon(partial(self._on_notify, payload))

    async def _check(self, channel: str, subscription: Subscription) -> bool:
        """Whether the connection hears a NOTIFY sent the way other processes send theirs,
        within ``LISTEN_CHECK``; ``True`` too when there is no connection to check now
        (the next one is checked as it comes)."""
        losses = self._losses
        if not subscription.ready.is_set():
            return True
        token = self._token = secrets.token_hex(8)
        try:
            await anyio.to_thread.run_sync(self._send_check, channel, token)
        except Exception as exc:  # the database is out of reach: checked once it is back
            self._failures.failed(exc)
            self._unchecked.set()
            return True
        deadline = time.monotonic() + LISTEN_CHECK.total_seconds()
        while not self.hearing and not self._stop.is_set():
            if self._losses != losses:  # that connection failed: the next one is checked
                return True
            if time.monotonic() > deadline:
                return False
            await anyio.sleep(0.01)
        return True

    def _connect_args(self, url: str | None) -> dict[str, Any]:
        return self.db.connect_args(None if url is None else make_url(url))

    def _send_check(self, channel: str, token: str) -> None:
        """NOTIFY the channel with ``token`` through the engine's URL, as other processes
        do, on a connection of its own."""
        send(self._connect_args(None), channel, notice_of_check(token))

    def _give_way(self) -> None:
        self.deaf = True
        shown = make_url(self._listen_url) if self._listen_url else self.db.url
        log.warning(
            "the LISTEN through %s did not hear a NOTIFY sent to it within %s: a connection "
            "pooler in transaction mode (PgBouncer, RDS Proxy, a pooled endpoint) does "
            "not carry LISTEN. Set listen_url (SQLA_SCHEDULER_LISTEN_URL) to a direct "
            "connection to PostgreSQL for wake-ups within milliseconds; until then this "
            "scheduler reads the earliest due time once a second instead",
            shown.render_as_string(hide_password=True),
            LISTEN_CHECK,
        )

    def _on_notify(self, payload: str) -> None:
        """Work due now wakes the picker if it wants work; work due later is a time to wait
        for (a wake-up only if it is earlier than the one it waits for). Work of tasks this
        scheduler does not run is none of its business. A pause or a resume of one of its
        tasks goes to ``on_pause``; a resume is news of work too. A stop request for an
        execution of one of its tasks goes to ``on_stop``."""
        stop = read_stop_notice(payload)
        if stop is not None:
            if stop[0] in self._names:
                self._on_stop(*stop)
            return
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
