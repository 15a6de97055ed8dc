"""Where the scheduler reads the time.

Every statement that depends on "now" binds the value a [`Clock`][] returns, so a test
can pin time with [`ManualClock`][] and move it forward instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime, timedelta, timezone
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


class DatabaseClock:
    """A machine clock corrected to the database server's clock.

    The scheduler's "now" decides what is due and which heartbeats are stale, and the
    workers of a cluster compare it with times that other machines wrote. A worker whose
    clock runs ahead would start executions early and revive executions that are alive
    elsewhere; one whose clock runs behind would write stale-looking heartbeats. This clock
    measures the offset between ``base`` (the machine's clock by default) and the
    database's ``clock_timestamp()`` and adds it to every reading, so all the workers of a
    cluster share the database's time, within the round trip of the measurement.

    [`measure`][] takes a connection; the runner calls it when it starts and again every
    ``refresh`` (from its maintenance loop), so a machine clock that steps or drifts is
    corrected. Until it is first measured, the clock reads ``base`` unchanged. It is the
    scheduler's default on PostgreSQL (SQLite is one machine's file: its clock is the
    machine's).
    """

    def __init__(self, base: Clock | None = None, *, refresh: timedelta = timedelta(minutes=1)):
        self.base: Clock = base if base is not None else SystemClock()
        self.refresh = refresh
        self._offset = timedelta(0)
        self._measured_at: float | None = None
        self._lock = threading.Lock()

    @property
    def offset(self) -> timedelta:
        """What is added to ``base``: the database's clock minus the machine's."""
        with self._lock:
            return self._offset

    def due(self) -> bool:
        """Whether the offset was never measured or is older than ``refresh``."""
        with self._lock:
            measured = self._measured_at
        return measured is None or time.monotonic() - measured >= self.refresh.total_seconds()

    def measure(self, conn: Connection, samples: int = 3) -> timedelta:
        """Measure the offset to the database's clock through ``conn``; return it.

        The server's reading is taken to fall in the middle of its round trip, so a
        reading's error is at most half the round trip. Of ``samples`` readings the one
        with the shortest round trip is kept: a busy machine or network delays some of
        them, seldom all.
        """
        from sqlalchemy import text

        query = text("SELECT clock_timestamp()")
        readings = [self._reading(conn, query) for _ in range(max(1, samples))]
        _round_trip, offset = min(readings, key=lambda reading: reading[0])
        with self._lock:
            self._offset = offset
            self._measured_at = time.monotonic()
        return offset

    def _reading(self, conn: Connection, query: TextClause) -> tuple[float, timedelta]:
        """One reading of the server's clock: its round trip (seconds) and the offset."""
        before = self.base.now()
        started = time.monotonic()
        server = conn.scalar(query)
        round_trip = time.monotonic() - started
        if not isinstance(server, datetime):
            raise TypeError(f"clock_timestamp() returned {server!r}")
        server = _as_utc(server, "clock_timestamp()")
        return round_trip, server - (before + timedelta(seconds=round_trip / 2))

    def now(self) -> datetime:
        """Return ``base.now()`` plus the measured offset."""
        # read without the lock: it guards the offset and its time of measuring together,
        # and one attribute read is atomic (this runs several times per execution)
        return self.base.now() + self._offset

    def __repr__(self) -> str:
        return f"DatabaseClock({self.base!r}, offset={self.offset})"


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
