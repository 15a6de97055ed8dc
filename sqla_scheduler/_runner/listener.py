"""The LISTEN service (PostgreSQL): hears NOTIFYs on the table's channel and turns them
into wake-ups of the picker.

LISTEN needs a session that stays with its client, which a connection pooler in
transaction mode (PgBouncer, RDS Proxy, a pooled endpoint) does not keep: it hands the
server connection to other clients after each transaction, and notifications go astray.
So the listener can connect elsewhere than the scheduler's engine (``listen_url``: a
direct connection for LISTEN alone), and each time it connects it checks that
notifications reach it: it sends one to itself through the engine's own URL, the way
other processes' NOTIFYs come, and waits up to ``LISTEN_CHECK`` for it. When that one
does not come, it says so once, with what to do, and gives way to the due-time probe
(``Prober``), as on a database without NOTIFY: work starts within about a second rather
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
)
from sqla_scheduler._durations import format_duration
from sqla_scheduler._runner.failures import Failures
from sqla_scheduler._runner.waker import Waker

__all__ = ["LISTEN_CHECK", "Listener"]

log = logging.getLogger("sqla_scheduler")

#: How long a new LISTEN connection waits for the notification it sent itself.
LISTEN_CHECK = timedelta(seconds=3)

#: How often the listener thread looks up from its socket to see whether to stop.
_LISTEN_TICK = 0.25


class _Deaf(Exception):
    """The notification a listener sent itself did not reach it."""


class Listener:
    """LISTENs on the table's channel and wakes the picker on each notification (or, for
    work due later, tells it the time; for a pause or a resume, ``on_pause``).

    The connection is psycopg's own, in a thread: SQLAlchemy has no notification API.
    While it is down, the picker's poll is all there is, and it reconnects with backoff.
    When notifications cannot reach it (see the module), ``on_deaf`` runs instead, for
    good.
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
        listen_url: str | None = None,
        on_deaf: Callable[[], Awaitable[None]] | None = None,
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
        self._listen_url = listen_url
        self._on_deaf = on_deaf
        self._stop = threading.Event()
        #: Whether notifications reach the current connection (its check came back):
        #: until then, and after it fails, the scheduler's own commits wake it directly.
        self.hearing = False
        #: Whether the check failed and ``on_deaf`` took over.
        self.deaf = False
        import psycopg  # the listener's own driver (PostgreSQL only)

        self._failures = Failures(
            f"the LISTEN connection (polling every {format_duration(polling_interval)} meanwhile)",
            expected=(DBAPIError, psycopg.Error, OSError),
        )

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
            except _Deaf:
                self._give_way()
                if self._on_deaf is not None:
                    await self._on_deaf()
                return
            except Exception as exc:
                self._failures.failed(exc)
            finally:
                self.hearing = False
            if connected.is_set():
                backoff = 0.5
            if self._stop.is_set():
                return
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    def run_once(self, connected: threading.Event) -> None:
        """One LISTEN connection, from connect to failure or ``stop`` (a worker thread).
        Raises ``_Deaf`` when its check does not come back in time."""
        import psycopg
        from psycopg import sql

        channel = notify_channel(self.table)
        with psycopg.connect(**self._connect_args(self._listen_url), autocommit=True) as conn:
            if not self._prepared:
                conn.prepare_threshold = None
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            connected.set()
            self._failures.worked()  # back after an outage: said once
            # Anything scheduled while nobody was listening is picked up now.
            self.waker.soon(self.waker.news)
            token = secrets.token_hex(8)
            self._send_check(channel, token)
            deadline = time.monotonic() + LISTEN_CHECK.total_seconds()
            while not self._stop.is_set():
                for notice in conn.notifies(timeout=_LISTEN_TICK, stop_after=1):
                    check = read_check_notice(notice.payload)
                    if check is not None:
                        if check == token and not self.hearing:
                            self.hearing = True
                            if self._listen_url is None:  # the engine's URL keeps sessions
                                self.db.sessions_kept()
                    elif not self._stop.is_set():
                        # Not anyio.from_thread.run_sync: a task per notice and a wait for
                        # it cost the start of the work a quarter of a millisecond.
                        self.waker.soon(partial(self._on_notify, notice.payload))
                if not self.hearing and time.monotonic() > deadline:
                    raise _Deaf

    def _connect_args(self, url: str | None) -> dict[str, Any]:
        return self.db.connect_args(None if url is None else make_url(url))

    def _send_check(self, channel: str, token: str) -> None:
        """NOTIFY the channel with ``token`` through the engine's URL, as other processes
        do, on a connection of its own."""
        import psycopg

        with psycopg.connect(**self._connect_args(None), autocommit=True) as conn:
            conn.prepare_threshold = None  # one statement; a pooler may not keep it
            conn.execute("SELECT pg_notify(%s, %s)", (channel, notice_of_check(token)))

    def _give_way(self) -> None:
        self.deaf = True
        shown = make_url(self._listen_url) if self._listen_url else self.db.url
        log.warning(
            "LISTEN through %s did not hear a NOTIFY sent to it within %s: a connection "
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
