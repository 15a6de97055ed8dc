"""Where the scheduler reads the time.

Every statement that depends on "now" binds the value a [`Clock`][] returns, so a test
can pin time with [`ManualClock`][] and move it forward instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import partial
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sqlalchemy import Connection, TextClause

__all__ = ["Clock", "DatabaseClock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of the current time as a timezone-aware UTC ``datetime``."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware, in UTC."""
        ...


class SystemClock:
    """The machine's wall clock, in UTC."""

    def now(self) -> datetime:
        """Return ``datetime.now`` in UTC."""
        return datetime.now(timezone.utc)

    def __repr__(self) -> str:
        return "SystemClock()"


#: How far a wall clock may run apart from the monotonic clock between two readings before
#: it is taken to have stepped.
STEP_TOLERANCE = timedelta(seconds=1)


def _steady_clock() -> Callable[[], float]:
    """A monotonic clock in seconds: Linux's ``CLOCK_BOOTTIME`` where there is one (it
    also counts the time the machine was suspended, so a resumed VM reads right), else
    ``time.monotonic``. Neither moves when someone or NTP sets the date."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is not None:
        try:
            time.clock_gettime(boottime)
        except OSError:  # pragma: no cover - a kernel without it
            pass
        else:
            return partial(time.clock_gettime, boottime)
    return time.monotonic  # pragma: no cover - not Linux


#: Seconds by a clock that never steps: what the time between two readings of a wall clock
#: is compared with, to tell a step.
steady_seconds = _steady_clock()


class DatabaseClock:
    """The database server's clock, read once and carried forward by a monotonic clock.

    The scheduler's "now" decides what is due and which heartbeats are stale, and the
    workers of a cluster compare it with times that other machines wrote. A worker whose
    clock runs ahead would start executions early and revive executions that are alive
    elsewhere; one whose clock runs behind would write stale-looking heartbeats. This
    clock reads the database's ``clock_timestamp()`` and, between readings, advances it by
    the time a monotonic clock measures (``CLOCK_BOOTTIME`` on Linux, which counts a
    suspended machine's sleep; else ``time.monotonic``), so all the workers of a cluster
    share the database's time, within the round trip of the measurement. A step of this
    machine's wall clock (NTP, a VM resumed, someone setting the date) therefore moves
    nothing: ``now()`` does not read it.

    [`measure`][] takes a connection; the runner calls it when it starts and again every
    ``refresh`` (from its maintenance loop), so drift of the monotonic clock stays small.
    [`due`][] is also true as soon as ``base`` has stepped against the monotonic clock
    since the last reading (by more than a second), so [`offset`][] (the database's clock
    minus ``base``, which the runner logs when it exceeds a second) is measured again at
    once. Until it is first measured, the clock reads ``base``. It is the scheduler's
    default on PostgreSQL (SQLite is one machine's file: its clock is the machine's).
    """

    def __init__(self, base: Clock | None = None, *, refresh: timedelta = timedelta(minutes=1)):
        self.base: Clock = base if base is not None else SystemClock()
        self.refresh = refresh
        self._steady = steady_seconds
        #: The kept reading: the server's time, and the monotonic and base clocks' times at
        #: the middle of its round trip. One object, replaced whole, so it needs no lock.
        self._reading: _Reading | None = None

    @property
    def offset(self) -> timedelta:
        """The database's clock minus ``base``, as last measured (zero before)."""
        reading = self._reading
        return timedelta(0) if reading is None else reading.server - reading.base

    def due(self) -> bool:
        """Whether the clock was never measured, was last measured ``refresh`` ago or
        more, or ``base`` has stepped since (its time since the measurement and the
        monotonic clock's differ by more than a second)."""
        reading = self._reading
        if reading is None:
            return True
        elapsed = self._steady() - reading.steady
        if elapsed >= self.refresh.total_seconds():
            return True
        drift = (self.base.now() - reading.base) - timedelta(seconds=elapsed)
        return abs(drift) > STEP_TOLERANCE

    def measure(self, conn: Connection, samples: int = 3) -> timedelta:
        """Read the database's clock through ``conn``; return the offset to ``base``.

        The server's reading is taken to fall in the middle of its round trip, so a
        reading's error is at most half the round trip. Of ``samples`` readings the one
        with the shortest round trip is kept: a busy machine or network delays some of
        them, seldom all.
        """
        from sqlalchemy import text

        from sqla_scheduler._dialects import backend_for

        backend = backend_for(conn.dialect)
        if backend.clock_query is None:
            raise NotImplementedError(f"{backend.name} has no clock that schedulers share")
        query = text(backend.clock_query)
        readings = [
            self._read(conn, query, backend.naive_timestamps) for _ in range(max(1, samples))
        ]
        _round_trip, kept = min(readings, key=lambda reading: reading[0])
        self._reading = kept
        return kept.server - kept.base

    def _read(self, conn: Connection, query: TextClause, naive: bool) -> tuple[float, _Reading]:
        """One reading of the server's clock, with its round trip in seconds; ``naive``, a
        reading without a zone is UTC."""
        before = self.base.now()
        started = self._steady()
        server = conn.scalar(query)
        round_trip = self._steady() - started
        if not isinstance(server, datetime):
            raise TypeError(f"{query} returned {server!r}")
        if naive and server.tzinfo is None:
            server = server.replace(tzinfo=timezone.utc)
        half = round_trip / 2
        return round_trip, _Reading(
            server=_as_utc(server, str(query)),
            steady=started + half,
            base=before + timedelta(seconds=half),
        )

    def now(self) -> datetime:
        """Return the database's time: its last reading plus the monotonic time since
        (``base.now()`` until the first reading)."""
        reading = self._reading
        if reading is None:
            return self.base.now()
        return reading.server + timedelta(seconds=self._steady() - reading.steady)

    def __repr__(self) -> str:
        return f"DatabaseClock({self.base!r}, offset={self.offset})"


@dataclass(frozen=True, slots=True)
class _Reading:
    server: datetime
    steady: float
    base: datetime


class ManualClock:
    """A clock that stands still until a test moves it.

    ```pycon
    >>> clock = ManualClock(datetime(2030, 1, 1, tzinfo=timezone.utc))
    >>> clock.advance(timedelta(minutes=5)).isoformat()
    '2030-01-01T00:05:00+00:00'

    ```
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._lock = threading.Lock()
        self._now = _as_utc(start, "start") if start is not None else SystemClock().now()

    def now(self) -> datetime:
        """Return the pinned time."""
        with self._lock:
            return self._now

    def set(self, when: datetime) -> datetime:
        """Move the clock to ``when`` (timezone-aware; it may go backwards) and return it."""
        aware = _as_utc(when, "when")
        with self._lock:
            self._now = aware
        return aware

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward by ``delta`` and return the new time."""
        if delta < timedelta(0):
            raise ValueError(f"ManualClock.advance takes a non-negative delta, got {delta!r}")
        with self._lock:
            self._now += delta
            return self._now

    def __repr__(self) -> str:
        return f"ManualClock({self.now().isoformat()!r})"


def _as_utc(value: datetime, field: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{field} must be timezone-aware, got naive {value.isoformat()!r}")
    return value.astimezone(timezone.utc)
