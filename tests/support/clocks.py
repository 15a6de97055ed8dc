"""The suite's instant: the time a manual clock starts at, unless a module needs another."""

from __future__ import annotations

from datetime import datetime, timezone

from sqla_scheduler import ManualClock

__all__ = ["NOW", "manual_clock"]

#: Noon of a day far enough ahead that no row a test writes is ever due by the wall clock.
NOW = datetime(2030, 5, 17, 12, 0, tzinfo=timezone.utc)


def manual_clock(at: datetime = NOW) -> ManualClock:
    """A clock that stands at ``at`` until the test moves it."""
    return ManualClock(at)
