"""The notifier: one LISTEN connection per database per process (PostgreSQL).

LISTEN needs a connection that stays with its client, read in a thread of its own
(psycopg's: SQLAlchemy has no notification API). Every part of a process that wants to
hear NOTIFYs subscribes here to a channel: the runner's wake-ups and pauses
(``_runner/listener``), each ``wait`` for a result. The subscribers of one database share
one connection, which LISTENs on the channels they name and closes once the last of them
has left; a thousand waits cost one connection, not a thousand.

A subscriber's callbacks run in the notifier's thread, so they only hand work on (set an
event, schedule a call in an event loop): ``on_notify(payload)`` for each NOTIFY on its
channel, ``on_connected()`` once its LISTEN is in place on a new connection (after an
outage too), ``on_lost(error)`` when the connection fails. The notifier then connects
again after a pause that grows to ``RECONNECT_MAX``.

``send`` is the other half: one NOTIFY on a connection of its own (the listener's check
that notifications reach it), and ``driver_errors`` the errors the driver of both raises.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

__all__ = ["RECONNECT_MAX", "Notifier", "Subscription", "driver_errors", "notifier_for", "send"]

log = logging.getLogger("sqla_scheduler")

#: The longest pause between two attempts to connect, in seconds.
RECONNECT_MAX = 30.0
#: The first pause after a failure.
_RECONNECT_FIRST = 0.5
#: How long the thread waits on its socket before it looks round (a connection that
#: died without a word is found at the next read).
_TICK = 1.0


def _ignore(*args: object) -> None:
    return None


class Subscription:
    """A subscriber's place on one channel of a ``Notifier``; ``close`` leaves it.

    ``ready`` is set while its LISTEN is in place on the notifier's connection."""

    def __init__(
        self,
        notifier: Notifier,
        channel: str,
        on_notify: Callable[[str], object],
        on_connected: Callable[[], object],
        on_lost: Callable[[BaseException], object],
    ) -> None:
        self.channel = channel
        self.on_notify = on_notify
        self.on_connected = on_connected
        self.on_lost = on_lost
        self.ready = threading.Event()
        #: The connection (by its number) this subscriber was told of.
        self.connection = 0
        self._notifier = notifier

    def close(self) -> None:
        """Hear nothing more (from any thread)."""
        self._notifier.leave(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Notifier:
    """The one LISTEN connection to one database (``connect_args``, psycopg's) and its
    subscribers; made by ``notifier_for``."""

    def __init__(self, key: tuple[tuple[str, str], ...], connect_args: Mapping[str, Any]) -> None:
        self._key = key
        self._connect_args = dict(connect_args)
        self._subscribers: list[Subscription] = []
        self._running = False
        #: Written to when the subscribers change, so that the thread looks up at once
        #: (made when the thread starts, closed when it ends).
        self._wake_read, self._wake_write = _wake_pair()
        self._connections = 0

    def subscribe(
        self,
        channel: str,
        on_notify: Callable[[str], object],
        *,
        on_connected: Callable[[], object] = _ignore,
        on_lost: Callable[[BaseException], object] = _ignore,
    ) -> Subscription:
        """Hear the NOTIFYs on ``channel`` from now on (see the module for the callbacks);
        ``ready`` on the subscription says when the LISTEN is in place."""
        subscription = Subscription(self, channel, on_notify, on_connected, on_lost)
        with _REGISTRY_LOCK:
            self._subscribers.append(subscription)
            if not self._running:  # (again, after its last subscriber left: registered anew)
                self._running = True
                _NOTIFIERS.setdefault(self._key, self)
                threading.Thread(
                    target=self._serve, name="sqla-scheduler-notifier", daemon=True
                ).start()
        self._poke()
        return subscription

    def leave(self, subscription: Subscription) -> None:
        """``subscription`` hears nothing more; the last one out closes the connection."""
        with _REGISTRY_LOCK:
            if subscription in self._subscribers:
                self._subscribers.remove(subscription)
        subscription.ready.clear()
        self._poke()

    def _poke(self) -> None:
        # full: the thread has been poked already; closed: the thread has ended
        with contextlib.suppress(OSError):
            self._wake_write.send(b"x")

    def _current(self) -> list[Subscription]:
        """The subscribers now; none means the thread ends (and leaves the registry, so
        that the next subscriber starts a notifier of its own)."""
        with _REGISTRY_LOCK:
            if not self._subscribers:
                self._running = False
                if _NOTIFIERS.get(self._key) is self:
                    del _NOTIFIERS[self._key]
                self._wake_read.close()
                self._wake_write.close()
            return list(self._subscribers)

    def _serve(self) -> None:
        import psycopg

        pause = _RECONNECT_FIRST
        while self._current():
            try:
                with psycopg.connect(**self._connect_args, autocommit=True) as conn:
                    conn.prepare_threshold = None  # a pooler may not keep prepared statements
                    self._connections += 1
                    pause = _RECONNECT_FIRST
                    self._listen(conn)
            except Exception as exc:
                for subscription in self._current():
                    subscription.ready.clear()
                    _call(subscription.on_lost, exc)
                self._sleep(pause)
                pause = min(pause * 2, RECONNECT_MAX)

    def _listen(self, conn: psycopg.Connection[Any]) -> None:
        """LISTEN on the subscribers' channels and hand them their NOTIFYs, until the last
        one leaves (or the connection fails: raises)."""
        from psycopg import sql

        listening: set[str] = set()
        while subscribers := self._current():
            wanted = {subscription.channel for subscription in subscribers}
            for channel in sorted(wanted - listening):
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            for channel in sorted(listening - wanted):
                conn.execute(sql.SQL("UNLISTEN {}").format(sql.Identifier(channel)))
            listening = wanted
            for subscription in subscribers:
                if subscription.connection != self._connections:
                    subscription.connection = self._connections
                    subscription.ready.set()
                    _call(subscription.on_connected)
            # NOTIFYs that came while a statement above ran are psycopg's backlog, which
            # notifies() yields first
            for notify in conn.notifies(timeout=0):
                for subscription in subscribers:
                    if subscription.channel == notify.channel:
                        _call(subscription.on_notify, notify.payload)
            wake = self._wake_read.fileno()
            readable, _, _ = select.select([conn.pgconn.socket, wake], [], [], _TICK)
            if wake in readable:
                self._drain()

    def _sleep(self, seconds: float) -> None:
        """Wait ``seconds`` before connecting again, or less when subscribers change."""
        readable, _, _ = select.select([self._wake_read.fileno()], [], [], seconds)
        if readable:
            self._drain()

    def _drain(self) -> None:
        with contextlib.suppress(OSError):  # nothing more to read
            while self._wake_read.recv(4096):
                pass


def _wake_pair() -> tuple[socket.socket, socket.socket]:
    """Two connected sockets, neither blocking: one end pokes, the other is selected on."""
    read, write = socket.socketpair()
    read.setblocking(False)
    write.setblocking(False)
    return read, write


def _call(callback: Callable[..., object], *args: Any) -> None:
    """A subscriber's callback: what it raises is logged, never the notifier's end."""
    try:
        callback(*args)
    except Exception:
        log.exception("a NOTIFY subscriber's %s failed", getattr(callback, "__name__", callback))


_REGISTRY_LOCK = threading.Lock()
_NOTIFIERS: dict[tuple[tuple[str, str], ...], Notifier] = {}


def notifier_for(connect_args: Mapping[str, Any]) -> Notifier:
    """This process's notifier for the database ``connect_args`` (psycopg's) reach."""
    key = tuple(sorted((name, repr(value)) for name, value in connect_args.items()))
    with _REGISTRY_LOCK:
        notifier = _NOTIFIERS.get(key)
        if notifier is None:
            notifier = _NOTIFIERS[key] = Notifier(key, connect_args)
        return notifier


def send(connect_args: Mapping[str, Any], channel: str, payload: str) -> None:
    """NOTIFY ``channel`` with ``payload`` on a connection of its own to the database
    ``connect_args`` (psycopg's) reach, as another process would."""
    import psycopg

    with psycopg.connect(**connect_args, autocommit=True) as conn:
        conn.prepare_threshold = None  # one statement; a pooler may not keep it
        conn.execute("SELECT pg_notify(%s, %s)", (channel, payload))


def driver_errors() -> tuple[type[Exception], ...]:
    """The errors the notifier's driver raises (psycopg's) when a database is out of
    reach, for a subscriber that counts its own failures."""
    import psycopg

    return (psycopg.Error,)
