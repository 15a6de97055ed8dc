"""Where the scheduler reads the time.

Every statement that depends on "now" binds the value a :class:`Clock` returns, so a test
can pin time with :class:`ManualClock` and move it forward instead of sleeping.
"""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "ManualClock", "SystemClock"]


@runtime_checkable
class Clock(Protocol):
    """A source of the current time as a timezone-aware UTC :class:`~datetime.datetime`."""

    def now(self) -> datetime:
        """Return the current time, timezone-aware, in UTC."""
        ...


class SystemClock:
    """The machine's wall clock, in UTC."""

    def now(self) -> datetime:
        """Return :func:`datetime.now` in UTC."""
        return datetime.now(timezone.utc)

    def __repr__(self) -> str:
        return "SystemClock()"


class ManualClock:
    """A clock that stands still until a test moves it.

    >>> clock = ManualClock(datetime(2030, 1, 1, tzinfo=timezone.utc))
    >>> clock.advance(timedelta(minutes=5)).isoformat()
    '2030-01-01T00:05:00+00:00'
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
