"""Recurring schedules: when a recurring task runs next, and their stored text form.

Five kinds exist, each a frozen value object:

* [`Cron`][] -- a Quartz-style cron expression (seconds first) in an IANA time zone;
* [`Daily`][] -- one or more wall-clock times of day in an IANA time zone;
* [`FixedRate`][] -- every ``every``, measured from when each run was scheduled;
* [`FixedDelay`][] -- ``after`` each run completes;
* [`Disabled`][] -- never.

Every datetime passed in must be timezone-aware (any zone); every datetime returned is
timezone-aware UTC.

Each schedule has a one-line text form (``str(schedule)`` or ``schedule.text``) that
[`parse_schedule`][] reads back to an equal schedule:

```text
FIXED_DELAY|30s             FIXED_RATE|1m|10s          DAILY|12:30,15:30|Europe/Rome
CRON|0 0 * * * ?            CRON|0 30 2 * * ?|Europe/Berlin        -
```

Daylight-saving time is handled the same way by [`Cron`][] and [`Daily`][], whose
times are wall-clock times in their zone:

* a wall-clock time that occurs twice (autumn) runs once, at its first occurrence;
* a wall-clock time that does not exist (spring) runs once, at the instant the gap ends;
  several times inside one gap collapse into that single run.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, time, timedelta, timezone
from typing import ClassVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadDateError, CroniterError, croniter

from sqla_scheduler._durations import format_duration, parse_duration
from sqla_scheduler.exceptions import InvalidScheduleError

__all__ = [
    "Cron",
    "Daily",
    "Disabled",
    "FixedDelay",
    "FixedRate",
    "Schedule",
    "parse_schedule",
]

_UTC_NAME = "UTC"
_ZERO = timedelta(0)
_SECOND = timedelta(seconds=1)
_MICROSECOND = timedelta(microseconds=1)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# A fixed, arbitrary start for the "does this expression ever match?" check.
_CRON_PROBE_START = datetime(2000, 1, 1)
_TIME_RE = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")
# croniter's "H" (hashed, needs a hash id) and "R" (random on every parse) are not usable
# for a schedule whose next time must be reproducible; month and day names never match.
_HASH_OR_RANDOM_RE = re.compile(r"(?<![A-Z])[HR](?![A-Z])")


class Schedule(ABC):
    """When a recurring task runs: the interface every schedule implements.

    Schedules are immutable, hashable values; two schedules are equal when their text forms
    are. All datetimes passed in must be timezone-aware (a naive one raises
    ``ValueError``); all datetimes returned are timezone-aware UTC.
    """

    __slots__ = ()

    deterministic: ClassVar[bool]
    """``True`` when the next time depends only on the clock (``Cron``, ``Daily``), so every
    node computes the same instant; ``False`` when it depends on when a run happened.
    """

    @abstractmethod
    def first_run(self, now: datetime) -> datetime | None:
        """Return when a newly registered recurring task first runs, or ``None`` for never."""

    @abstractmethod
    def next_run(self, *, scheduled_at: datetime, completed_at: datetime) -> datetime:
        """Return the next execution time, strictly after ``completed_at``.

        ``scheduled_at`` is when the execution that just finished was due to run and
        ``completed_at`` is when it finished.
        """

    @property
    @abstractmethod
    def text(self) -> str:
        """The stored text form, which [`parse_schedule`][] reads back to an equal schedule."""

    def __str__(self) -> str:
        """Return ``text``."""
        return self.text


@dataclass(frozen=True, slots=True)
class Cron(Schedule):
    """A Quartz-style cron expression evaluated on the wall clock of time zone ``tz``.

    Six fields, seconds first: ``second minute hour day-of-month month day-of-week``, e.g.
    ``Cron("0 */15 * * * ?")`` runs every quarter hour. The classic five-field form
    (``minute hour day-of-month month day-of-week``) is accepted too and runs at second 0.
    Parsing is done by croniter, so its syntax applies (``?``, ``L``, ``#``, names such as
    ``MON-FRI``); note that numeric days of the week follow Unix cron (0 or 7 = Sunday,
    1 = Monday), not Quartz, so prefer names. A year field, croniter's hashed (``H``) and
    random (``R``) values, and expressions that never match (``0 0 0 30 2 ?``) are rejected.

    Whitespace in ``expr`` is collapsed to single spaces.
    """

    expr: str
    tz: str = _UTC_NAME

    deterministic: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if not isinstance(self.expr, str):
            raise InvalidScheduleError(f"Cron expression must be a string, got {self.expr!r}")
        expr = " ".join(self.expr.split())
        object.__setattr__(self, "expr", expr)
        _zone(self.tz, "Cron.tz")
        fields = len(expr.split(" ")) if expr else 0
        if fields not in (5, 6):
            raise InvalidScheduleError(
                f"Cron expression {expr!r} is invalid: expected 6 fields (second minute hour "
                f"day-of-month month day-of-week) or 5 (without the seconds), got {fields}"
                + ("; a year field is not supported" if fields == 7 else "")
            )
        if _HASH_OR_RANDOM_RE.search(expr.upper()):
            raise InvalidScheduleError(
                f"Cron expression {expr!r} is invalid: hashed ('H') and random ('R') values "
                "are not supported"
            )
        try:
            self._iterate(_CRON_PROBE_START).get_next(datetime)
        except CroniterBadDateError as exc:
            raise InvalidScheduleError(
                f"Cron expression {expr!r} is invalid: it never matches any date"
            ) from exc
        except (CroniterError, ValueError, TypeError, KeyError, IndexError) as exc:
            raise InvalidScheduleError(f"Cron expression {expr!r} is invalid: {exc}") from exc

    def _iterate(self, start: datetime) -> croniter[datetime]:
        return croniter(
            self.expr,
            start,
            ret_type=datetime,
            second_at_beginning=self.expr.count(" ") == 5,
        )

    def _next_after(self, after: datetime) -> datetime:
        zone = ZoneInfo(self.tz)
        iterator = self._iterate(_wall_clock_start(after, zone))
        while True:
            instant = _resolve_wall_time(iterator.get_next(datetime), zone)
            if instant > after:
                return instant

    def first_run(self, now: datetime) -> datetime:
        """Return the first instant matching the expression strictly after ``now``."""
        return self._next_after(_require_aware(now, "now"))

    def next_run(self, *, scheduled_at: datetime, completed_at: datetime) -> datetime:
        """Return the first instant matching the expression strictly after ``completed_at``."""
        _require_aware(scheduled_at, "scheduled_at")
        return self._next_after(_require_aware(completed_at, "completed_at"))

    @property
    def text(self) -> str:
        """``CRON|<expr>``, plus ``|<tz>`` unless the zone is UTC."""
        return f"CRON|{self.expr}" + _tz_suffix(self.tz)


class _AfterInitialDelay(Schedule):
    """What the fixed schedules share: the first run comes ``initial_delay`` after start-up."""

    __slots__ = ()
    initial_delay: timedelta

    def first_run(self, now: datetime) -> datetime:
        """Return ``now + initial_delay``."""
        return _require_aware(now, "now") + self.initial_delay


def _set_intervals(
    schedule: _AfterInitialDelay, name: str, interval: object, initial_delay: object
) -> None:
    """Validate and set a fixed schedule's ``name`` (positive) and ``initial_delay``."""
    kind = type(schedule).__name__
    object.__setattr__(schedule, name, _duration(interval, f"{kind}.{name}", allow_zero=False))
    object.__setattr__(
        schedule,
        "initial_delay",
        _duration(initial_delay, f"{kind}.initial_delay", allow_zero=True),
    )


@dataclass(frozen=True, slots=True, init=False)
class FixedRate(_AfterInitialDelay):
    """Run every ``every``, counted from when the previous run was scheduled.

    A run that finishes late does not cause catch-up runs: when ``scheduled_at + every`` has
    already passed at completion, the next run is ``every`` after completion instead. The
    first run is ``initial_delay`` after registration. Durations are
    ``timedelta`` values, strings such as ``"30s"`` or ``"1h30m"``, or numbers of seconds.
    """

    every: timedelta
    initial_delay: timedelta

    deterministic: ClassVar[bool] = False

    def __init__(
        self, every: timedelta | str | float, initial_delay: timedelta | str | float = _ZERO
    ) -> None:
        """Validate and normalize; ``every`` must be positive, ``initial_delay`` not negative."""
        _set_intervals(self, "every", every, initial_delay)

    def next_run(self, *, scheduled_at: datetime, completed_at: datetime) -> datetime:
        """Return ``scheduled_at + every``, or ``completed_at + every`` if that has passed."""
        due = _require_aware(scheduled_at, "scheduled_at") + self.every
        completed = _require_aware(completed_at, "completed_at")
        return due if due > completed else completed + self.every

    @property
    def text(self) -> str:
        """``FIXED_RATE|<every>``, plus ``|<initial_delay>`` when it is not zero."""
        return f"FIXED_RATE|{format_duration(self.every)}" + _delay_suffix(self.initial_delay)


@dataclass(frozen=True, slots=True, init=False)
class FixedDelay(_AfterInitialDelay):
    """Run ``after`` each run completes; the first run is ``initial_delay`` after registration.

    Durations are ``timedelta`` values, strings such as ``"30s"``, or numbers of seconds.
    """

    after: timedelta
    initial_delay: timedelta

    deterministic: ClassVar[bool] = False

    def __init__(
        self, after: timedelta | str | float, initial_delay: timedelta | str | float = _ZERO
    ) -> None:
        """Validate and normalize; ``after`` must be positive, ``initial_delay`` not negative."""
        _set_intervals(self, "after", after, initial_delay)

    def next_run(self, *, scheduled_at: datetime, completed_at: datetime) -> datetime:
        """Return ``completed_at + after``."""
        _require_aware(scheduled_at, "scheduled_at")
        return _require_aware(completed_at, "completed_at") + self.after

    @property
    def text(self) -> str:
        """``FIXED_DELAY|<after>``, plus ``|<initial_delay>`` when it is not zero."""
        return f"FIXED_DELAY|{format_duration(self.after)}" + _delay_suffix(self.initial_delay)


@dataclass(frozen=True, slots=True, init=False)
class Daily(Schedule):
    """Run every day at one or more wall-clock times in time zone ``tz``.

    Times are ``time`` values without tzinfo or microseconds, or strings ``"HH:MM"`` /
    ``"HH:MM:SS"``, given positionally, as ``times=``, or both:

    ```python
    Daily(time(12, 30), "15:30", tz="Europe/Rome")
    ```

    They are stored as a sorted tuple without duplicates; at least one is required.
    """

    times: tuple[time, ...]
    tz: str

    deterministic: ClassVar[bool] = True

    def __init__(
        self, *at: time | str, times: Iterable[time | str] = (), tz: str = _UTC_NAME
    ) -> None:
        """Validate and normalize the times and the zone."""
        if isinstance(times, str):
            times = (times,)
        given = [*at, *times]
        if not given:
            raise InvalidScheduleError("Daily needs at least one time of day, got none")
        object.__setattr__(self, "times", tuple(sorted({_time_of_day(t) for t in given})))
        _zone(tz, "Daily.tz")
        object.__setattr__(self, "tz", tz)

    def _next_after(self, after: datetime) -> datetime:
        zone = ZoneInfo(self.tz)
        start = _wall_clock_start(after, zone)
        day = start.date()
        while True:
            for at in self.times:
                candidate = datetime.combine(day, at)
                if candidate > start:
                    instant = _resolve_wall_time(candidate, zone)
                    if instant > after:
                        return instant
            day += timedelta(days=1)

    def first_run(self, now: datetime) -> datetime:
        """Return the first of the times strictly after ``now``."""
        return self._next_after(_require_aware(now, "now"))

    def next_run(self, *, scheduled_at: datetime, completed_at: datetime) -> datetime:
        """Return the first of the times strictly after ``completed_at``."""
        _require_aware(scheduled_at, "scheduled_at")
        return self._next_after(_require_aware(completed_at, "completed_at"))

    @property
    def text(self) -> str:
        """``DAILY|HH:MM[:SS],...``, plus ``|<tz>`` unless the zone is UTC."""
        return "DAILY|" + ",".join(map(_format_time, self.times)) + _tz_suffix(self.tz)


@dataclass(frozen=True, slots=True)
class Disabled(Schedule):
    """Never run: a recurring task whose schedule is switched off. Its text form is ``-``."""

    deterministic: ClassVar[bool] = False

    def first_run(self, now: datetime) -> datetime | None:
        """Return ``None``: a disabled task is not scheduled."""
        _require_aware(now, "now")
        return None

    def next_run(self, *, scheduled_at: datetime, completed_at: datetime) -> datetime:
        """Raise [`InvalidScheduleError`][]: a disabled schedule has no next run."""
        _require_aware(scheduled_at, "scheduled_at")
        _require_aware(completed_at, "completed_at")
        raise InvalidScheduleError("A Disabled schedule ('-') has no next run")

    @property
    def text(self) -> str:
        """``-``."""
        return "-"


def parse_schedule(text: str) -> Schedule:
    """Read a schedule's text form, the inverse of [`Schedule.text`][].

    Surrounding whitespace and the case of the kind word are ignored
    (``" fixed_delay|30s "`` works). Anything else invalid raises
    [`InvalidScheduleError`][] naming the text.
    """
    if not isinstance(text, str):
        raise InvalidScheduleError(f"Schedule text must be a string, got {text!r}")
    stripped = text.strip()
    if stripped == "-":
        return Disabled()
    head, _, rest = stripped.partition("|")
    kind = head.strip().upper()
    fields = [field.strip() for field in rest.split("|")] if "|" in stripped else []
    try:
        if kind not in _PARSERS:
            raise InvalidScheduleError(
                f"unknown kind {head.strip()!r}; expected CRON, DAILY, FIXED_RATE, FIXED_DELAY "
                "or '-'"
            )
        if len(fields) not in (1, 2):
            raise InvalidScheduleError(
                f"{kind} takes 1 or 2 fields after the kind, got {len(fields)}"
            )
        return _PARSERS[kind](*fields)
    except InvalidScheduleError as exc:
        raise InvalidScheduleError(f"Schedule text {text!r} is invalid: {exc}") from exc


def _parse_cron(expr: str, tz: str = _UTC_NAME) -> Schedule:
    return Cron(expr, tz=tz)


def _parse_daily(times: str, tz: str = _UTC_NAME) -> Schedule:
    return Daily(*times.split(","), tz=tz)


def _parse_fixed_rate(every: str, initial_delay: str = "0s") -> Schedule:
    return FixedRate(every, initial_delay=initial_delay)


def _parse_fixed_delay(after: str, initial_delay: str = "0s") -> Schedule:
    return FixedDelay(after, initial_delay=initial_delay)


_PARSERS: dict[str, Callable[..., Schedule]] = {
    "CRON": _parse_cron,
    "DAILY": _parse_daily,
    "FIXED_RATE": _parse_fixed_rate,
    "FIXED_DELAY": _parse_fixed_delay,
}


# --------------------------------------------------------------------------- helpers


def _require_aware(value: datetime, name: str) -> datetime:
    """Return ``value`` in UTC; raise ValueError when it is naive."""
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got naive {value.isoformat()!r}")
    return value.astimezone(timezone.utc)


def _zone(tz: object, field: str) -> ZoneInfo:
    if not isinstance(tz, str):
        raise InvalidScheduleError(f"{field} must be an IANA time zone name, got {tz!r}")
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise InvalidScheduleError(
            f"{field} {tz!r} is not a known IANA time zone (e.g. 'Europe/Berlin', 'UTC')"
        ) from exc


def _tz_suffix(tz: str) -> str:
    return "" if tz == _UTC_NAME else f"|{tz}"


_MAX_DURATION = timedelta(days=36_525)
"""The longest interval a schedule takes: 100 years keeps every run within year 9999."""


def _duration(value: object, field: str, *, allow_zero: bool) -> timedelta:
    requirement = "zero or more" if allow_zero else "positive"
    if isinstance(value, timedelta):
        result = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidScheduleError(f"{field} must be a {requirement} duration, got {value!r}")
        try:
            result = timedelta(seconds=value)
        except OverflowError:
            result = _MAX_DURATION * 2  # refused below, as any duration past the limit
    elif isinstance(value, str):
        try:
            result = parse_duration(value)
        except (ValueError, OverflowError) as exc:
            raise InvalidScheduleError(
                f"{field} must be a {requirement} duration, got {value!r} ({exc})"
            ) from exc
    else:
        raise InvalidScheduleError(
            f"{field} must be a timedelta, a duration string such as '30s' or a number of "
            f"seconds, got {value!r}"
        )
    shown = str(value) if isinstance(value, timedelta) else repr(value)
    if result < _ZERO or (result == _ZERO and not allow_zero):
        raise InvalidScheduleError(f"{field} must be {requirement}, got {shown}")
    if result > _MAX_DURATION:
        raise InvalidScheduleError(
            f"{field} must be at most {_MAX_DURATION.days} days (100 years), got {shown}"
        )
    return result


def _delay_suffix(initial_delay: timedelta) -> str:
    return f"|{format_duration(initial_delay)}" if initial_delay else ""


def _time_of_day(value: object) -> time:
    if isinstance(value, str):
        match = _TIME_RE.fullmatch(value.strip())
        if match is None:
            raise InvalidScheduleError(
                f"Daily time {value!r} is invalid: expected 'HH:MM' or 'HH:MM:SS'"
            )
        hour, minute, second = (int(group) if group else 0 for group in match.groups())
        try:
            return time(hour, minute, second)
        except ValueError as exc:
            raise InvalidScheduleError(f"Daily time {value!r} is invalid: {exc}") from exc
    if isinstance(value, time):
        if value.tzinfo is not None:
            raise InvalidScheduleError(
                f"Daily time {value!r} is invalid: give a naive time and set Daily.tz instead"
            )
        if value.microsecond:
            raise InvalidScheduleError(
                f"Daily time {value!r} is invalid: times have a resolution of one second"
            )
        return value.replace(fold=0)
    raise InvalidScheduleError(
        f"Daily time must be a datetime.time or an 'HH:MM[:SS]' string, got {value!r}"
    )


def _format_time(value: time) -> str:
    return value.strftime("%H:%M:%S" if value.second else "%H:%M")


def _offset_change(low: datetime, high: datetime, zone: ZoneInfo) -> datetime:
    """Return the instant in ``(low, high]`` where ``zone``'s UTC offset changes.

    ``low`` and ``high`` are UTC instants with different offsets in ``zone`` and at most one
    transition between them; transitions fall on whole seconds.
    """

    def offset(seconds: int) -> timedelta | None:
        return (_EPOCH + timedelta(seconds=seconds)).astimezone(zone).utcoffset()

    # Whole seconds since the epoch, rounded down: the transition is still in (lo, hi].
    lo = (low - _EPOCH) // _SECOND
    hi = (high - _EPOCH) // _SECOND
    before = offset(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offset(mid) == before:
            lo = mid
        else:
            hi = mid
    return _EPOCH + timedelta(seconds=hi)


def _resolve_wall_time(naive: datetime, zone: ZoneInfo) -> datetime:
    """Map a wall-clock time in ``zone`` to a UTC instant.

    An ambiguous time (repeated when the clocks go back) maps to its first occurrence; a
    time that does not exist (skipped when the clocks go forward) maps to the instant the
    gap ends. The mapping never decreases as ``naive`` increases.
    """
    first = naive.replace(tzinfo=zone, fold=0)
    second = naive.replace(tzinfo=zone, fold=1)
    early = first.astimezone(timezone.utc)
    if first.utcoffset() == second.utcoffset():
        return early
    if early.astimezone(zone).replace(tzinfo=None) == naive:
        return early  # exists twice: fold=0 is the first occurrence
    late = second.astimezone(timezone.utc)
    return _offset_change(min(early, late), max(early, late), zone)


def _wall_clock_start(after: datetime, zone: ZoneInfo) -> datetime:
    """Return the naive wall time in ``zone`` to search forward from for times after ``after``.

    Every wall time at or before the result maps (through ``_resolve_wall_time``) to an
    instant at or before ``after``. Normally that is the local time of ``after``; during the
    second pass of a repeated hour, the whole repeated hour maps to its first pass, so the
    search starts where the repetition ends instead of walking through it.
    """
    local = after.astimezone(zone)
    naive = local.replace(tzinfo=None, fold=0)
    if local.fold:
        first = naive.replace(tzinfo=zone)  # fold=0: the first pass
        earlier_offset, later_offset = first.utcoffset(), local.utcoffset()
        if (
            earlier_offset is not None
            and later_offset is not None
            and earlier_offset > later_offset
        ):
            change = _offset_change(first.astimezone(timezone.utc), after, zone)
            return change.replace(tzinfo=None) + earlier_offset - _MICROSECOND
    return naive
