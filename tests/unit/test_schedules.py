"""Tests for sqla_scheduler.schedules: next times, DST rules, text forms and validation."""

from __future__ import annotations

import dataclasses
import os
import pickle
from collections.abc import Callable
from datetime import datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from sqla_scheduler.exceptions import InvalidScheduleError
from sqla_scheduler.schedules import (
    Cron,
    Daily,
    Disabled,
    FixedDelay,
    FixedRate,
    Schedule,
    _wall_clock_start,
    parse_schedule,
)

UTC = timezone.utc
BERLIN = "Europe/Berlin"
NEW_YORK = "America/New_York"
KOLKATA = "Asia/Kolkata"
LORD_HOWE = "Australia/Lord_Howe"
ZONES = ["UTC", BERLIN, NEW_YORK, KOLKATA, LORD_HOWE]

CRON_EXPRESSIONS = [
    "0 * * ? * *",
    "*/10 * * * * *",
    "0 */15 * * * ?",
    "0 30 * * * ?",
    "0 0 2 * * ?",
    "0 30 2 * * ?",
    "30 45 1 * * ?",
    "0 10,20,40 2 * * ?",
    "0 0 12 ? * MON-FRI",
    "0 0 0 L * ?",
    "0 0 12 29 2 ?",
    "*/5 * * * *",
    "15 2 * * *",
    "0 0 1 * *",
]

# Instants (UTC) at which the UTC offset of a zone in ZONES changes.
TRANSITIONS = {
    (BERLIN, "spring"): datetime(2024, 3, 31, 1, tzinfo=UTC),
    (BERLIN, "autumn"): datetime(2024, 10, 27, 1, tzinfo=UTC),
    (NEW_YORK, "spring"): datetime(2024, 3, 10, 7, tzinfo=UTC),
    (NEW_YORK, "autumn"): datetime(2024, 11, 3, 6, tzinfo=UTC),
    (LORD_HOWE, "spring"): datetime(2024, 10, 5, 15, 30, tzinfo=UTC),
    (LORD_HOWE, "autumn"): datetime(2024, 4, 6, 15, tzinfo=UTC),
}

#: Hypothesis's default number of examples in the suite; ``SQLA_SCHEDULER_SOAK=1`` (the soak
#: of docs/contributing.md) tries ten times as many.
PROPERTY = settings(
    max_examples=1000 if os.environ.get("SQLA_SCHEDULER_SOAK") == "1" else 100, deadline=None
)
QUICK = settings(max_examples=100, deadline=None)


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, micro: int = 0
) -> datetime:
    """A UTC datetime from its fields."""
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def after(schedule: Schedule, moment: datetime) -> datetime:
    """The next run of ``schedule`` after a run scheduled for and completed at ``moment``."""
    return schedule.next_run(scheduled_at=moment, completed_at=moment)


def runs(schedule: Schedule, start: datetime, count: int) -> list[datetime]:
    """The next ``count`` runs of ``schedule`` after ``start``, each finishing instantly."""
    result: list[datetime] = []
    moment = start
    for _ in range(count):
        moment = after(schedule, moment)
        result.append(moment)
    return result


def is_offset_change(zone: str, instant: datetime) -> bool:
    """Whether ``zone``'s UTC offset changes exactly at ``instant``."""
    tz = ZoneInfo(zone)
    before = (instant - timedelta(microseconds=1)).astimezone(tz).utcoffset()
    return before != instant.astimezone(tz).utcoffset()


def assert_utc(value: datetime | None) -> datetime:
    """Assert ``value`` is a datetime whose tzinfo is ``timezone.utc`` and return it."""
    assert value is not None
    assert value.tzinfo is UTC
    return value


# --------------------------------------------------------------------------- strategies

zone_names = st.sampled_from(ZONES)
durations = st.timedeltas(min_value=timedelta(milliseconds=1), max_value=timedelta(days=30))
delays = st.one_of(st.just(timedelta(0)), durations)
times_of_day = st.times().map(lambda value: value.replace(microsecond=0))

crons = st.builds(Cron, st.sampled_from(CRON_EXPRESSIONS), tz=zone_names)
dailies = st.builds(
    lambda values, tz: Daily(*values, tz=tz),
    st.lists(
        st.one_of(times_of_day, times_of_day.map(lambda t: t.isoformat())), min_size=1, max_size=4
    ),
    zone_names,
)
fixed_rates = st.builds(FixedRate, durations, initial_delay=delays)
fixed_delays = st.builds(FixedDelay, durations, initial_delay=delays)
deterministic_schedules = st.one_of(crons, dailies)
recurring_schedules = st.one_of(crons, dailies, fixed_rates, fixed_delays)
all_schedules = st.one_of(recurring_schedules, st.just(Disabled()))

random_instants = st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.sampled_from([UTC, *(ZoneInfo(name) for name in ZONES)]),
    allow_imaginary=False,
)
near_transitions = st.builds(
    lambda base, shift: base + shift,
    st.sampled_from(sorted(TRANSITIONS.values())),
    st.timedeltas(min_value=timedelta(hours=-26), max_value=timedelta(hours=26)),
)
instants = st.one_of(random_instants, near_transitions)


def test_transition_table_is_right() -> None:
    for (zone, _), instant in TRANSITIONS.items():
        assert is_offset_change(zone, instant)
        assert not is_offset_change(zone, instant + timedelta(seconds=1))


# --------------------------------------------------------------------------- properties


@PROPERTY
@given(schedule=all_schedules)
def test_text_round_trips(schedule: Schedule) -> None:
    assert parse_schedule(schedule.text) == schedule
    assert parse_schedule(str(schedule)) == schedule
    assert hash(parse_schedule(schedule.text)) == hash(schedule)
    assert str(schedule) == schedule.text
    kind, bar, rest = schedule.text.partition("|")
    assert parse_schedule(f"  {kind.lower()}{bar}{rest}\n") == schedule


@PROPERTY
@given(
    schedule=recurring_schedules,
    scheduled_at=instants,
    lag=st.timedeltas(min_value=timedelta(hours=-1), max_value=timedelta(days=3)),
)
def test_next_run_is_strictly_after_completion(
    schedule: Schedule, scheduled_at: datetime, lag: timedelta
) -> None:
    completed_at = scheduled_at.astimezone(UTC) + lag
    result = assert_utc(schedule.next_run(scheduled_at=scheduled_at, completed_at=completed_at))
    assert result > completed_at


@PROPERTY
@given(schedule=recurring_schedules, now=instants)
def test_first_run(schedule: Schedule, now: datetime) -> None:
    result = assert_utc(schedule.first_run(now))
    assert result >= now
    if isinstance(schedule, (FixedRate, FixedDelay)):
        assert result == now.astimezone(UTC) + schedule.initial_delay
    else:
        assert result > now
        assert result == after(schedule, now)


@PROPERTY
@given(
    every=durations,
    scheduled_at=instants,
    lateness=st.floats(min_value=-1.0, max_value=5.0, allow_nan=False),
)
def test_fixed_rate_keeps_the_rate_without_a_backlog(
    every: timedelta, scheduled_at: datetime, lateness: float
) -> None:
    # Aware arithmetic in a ZoneInfo zone is wall-clock arithmetic, and an instant in a
    # repeated hour never compares equal to one in another zone (PEP 495): work in UTC.
    due = scheduled_at.astimezone(UTC) + every
    completed_at = scheduled_at.astimezone(UTC) + every * lateness
    result = assert_utc(
        FixedRate(every).next_run(scheduled_at=scheduled_at, completed_at=completed_at)
    )
    assert result > completed_at
    if due > completed_at:
        assert result == due
    else:
        assert result == completed_at + every


@QUICK
@given(after_=durations, scheduled_at=instants, lag=durations)
def test_fixed_delay_counts_from_completion(
    after_: timedelta, scheduled_at: datetime, lag: timedelta
) -> None:
    completed_at = scheduled_at + lag  # in scheduled_at's zone
    result = FixedDelay(after_).next_run(scheduled_at=scheduled_at, completed_at=completed_at)
    assert assert_utc(result) == completed_at.astimezone(UTC) + after_


@PROPERTY
@given(
    schedule=deterministic_schedules,
    completed_at=instants,
    other_scheduled_at=random_instants,
    fraction=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    later=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=2)),
)
def test_deterministic_next_run_depends_only_on_the_clock_and_skips_nothing(
    schedule: Schedule,
    completed_at: datetime,
    other_scheduled_at: datetime,
    fraction: float,
    later: timedelta,
) -> None:
    assert schedule.deterministic
    result = after(schedule, completed_at)
    completed_at = completed_at.astimezone(UTC)
    # scheduled_at plays no part.
    assert result == schedule.next_run(scheduled_at=other_scheduled_at, completed_at=completed_at)
    # No matching instant lies between completed_at and result: from any point in between,
    # the next run is still result.
    gap = result - completed_at
    inside = completed_at + min(gap * fraction, gap - timedelta(microseconds=1))
    assert after(schedule, inside) == result
    assert after(schedule, result - timedelta(microseconds=1)) == result
    # The next time never decreases as the clock moves on.
    assert after(schedule, completed_at + later) >= result


@PROPERTY
@given(expr=st.sampled_from(CRON_EXPRESSIONS), moment=random_instants)
def test_cron_in_utc_agrees_with_croniter(expr: str, moment: datetime) -> None:
    naive = moment.astimezone(UTC).replace(tzinfo=None)
    iterator = croniter(expr, naive, ret_type=datetime, second_at_beginning=expr.count(" ") == 5)
    expected = iterator.get_next(datetime).replace(tzinfo=UTC)
    assert after(Cron(expr), moment) == expected


@PROPERTY
@given(schedule=crons, moment=instants)
def test_cron_runs_on_a_matching_wall_time_or_at_the_end_of_a_gap(
    schedule: Cron, moment: datetime
) -> None:
    result = after(schedule, moment)
    local = result.astimezone(ZoneInfo(schedule.tz)).replace(tzinfo=None)
    six = schedule.expr.count(" ") == 5
    matches = croniter.match(schedule.expr, local, second_at_beginning=six)
    assert matches or is_offset_change(schedule.tz, result)


@PROPERTY
@given(schedule=dailies, moment=instants)
def test_daily_runs_on_one_of_its_times_or_at_the_end_of_a_gap(
    schedule: Daily, moment: datetime
) -> None:
    result = after(schedule, moment)
    local = result.astimezone(ZoneInfo(schedule.tz))
    assert local.time() in schedule.times or is_offset_change(schedule.tz, result)


@PROPERTY
@given(at=times_of_day, tz=zone_names, moment=instants)
def test_daily_agrees_with_the_equivalent_cron(at: time, tz: str, moment: datetime) -> None:
    cron = Cron(f"{at.second} {at.minute} {at.hour} * * ?", tz=tz)
    daily = Daily(at, tz=tz)
    assert after(daily, moment) == after(cron, moment)
    assert daily.first_run(moment) == cron.first_run(moment)


@QUICK
@given(tz=zone_names, moment=instants)
def test_five_field_cron_is_six_field_cron_at_second_zero(tz: str, moment: datetime) -> None:
    for five, six in [("*/5 * * * *", "0 */5 * * * ?"), ("15 2 * * *", "0 15 2 * * ?")]:
        assert after(Cron(five, tz=tz), moment) == after(Cron(six, tz=tz), moment)


# --------------------------------------------------------------------------- DST, pinned

PINNED = [
    pytest.param(
        Cron("0 30 2 * * ?", tz=BERLIN),
        utc(2024, 3, 29, 12),
        [utc(2024, 3, 30, 1, 30), utc(2024, 3, 31, 1, 0), utc(2024, 4, 1, 0, 30)],
        id="berlin-spring-daily-cron-in-gap-runs-once-at-gap-end",
    ),
    pytest.param(
        Daily("02:30", tz=BERLIN),
        utc(2024, 3, 29, 12),
        [utc(2024, 3, 30, 1, 30), utc(2024, 3, 31, 1, 0), utc(2024, 4, 1, 0, 30)],
        id="berlin-spring-daily-in-gap-runs-once-at-gap-end",
    ),
    pytest.param(
        Cron("0 10,20,40 2 * * ?", tz=BERLIN),
        utc(2024, 3, 30, 12),
        [utc(2024, 3, 31, 1, 0), utc(2024, 4, 1, 0, 10), utc(2024, 4, 1, 0, 20)],
        id="berlin-spring-three-skipped-times-collapse",
    ),
    pytest.param(
        Daily("02:10", "02:20", "02:40", tz=BERLIN),
        utc(2024, 3, 30, 12),
        [utc(2024, 3, 31, 1, 0), utc(2024, 4, 1, 0, 10), utc(2024, 4, 1, 0, 20)],
        id="berlin-spring-daily-three-skipped-times-collapse",
    ),
    pytest.param(
        Cron("0 */15 * * * ?", tz=BERLIN),
        utc(2024, 3, 31, 0, 40),
        [
            utc(2024, 3, 31, 0, 45),  # 01:45 CET
            utc(2024, 3, 31, 1, 0),  # 02:00-02:45 skipped, 03:00 CEST: one run
            utc(2024, 3, 31, 1, 15),  # 03:15 CEST
            utc(2024, 3, 31, 1, 30),
        ],
        id="berlin-spring-every-15-minutes",
    ),
    pytest.param(
        Cron("0 30 * * * ?", tz=BERLIN),
        utc(2024, 10, 26, 23),
        [
            utc(2024, 10, 26, 23, 30),  # 01:30 CEST
            utc(2024, 10, 27, 0, 30),  # 02:30 CEST, the first 02:30
            utc(2024, 10, 27, 2, 30),  # 03:30 CET; the second 02:30 (01:30Z) is not run
            utc(2024, 10, 27, 3, 30),
        ],
        id="berlin-autumn-hourly-repeated-hour-runs-once",
    ),
    pytest.param(
        Daily("02:30", tz=BERLIN),
        utc(2024, 10, 25, 12),
        [utc(2024, 10, 26, 0, 30), utc(2024, 10, 27, 0, 30), utc(2024, 10, 28, 1, 30)],
        id="berlin-autumn-daily-repeated-time-runs-once-first-occurrence",
    ),
    pytest.param(
        Cron("0 30 2 * * ?", tz=NEW_YORK),
        utc(2024, 3, 9, 12),
        [utc(2024, 3, 10, 7, 0), utc(2024, 3, 11, 6, 30)],
        id="new-york-spring-cron-in-gap",
    ),
    pytest.param(
        Daily("02:30", tz=NEW_YORK),
        utc(2024, 3, 9, 12),
        [utc(2024, 3, 10, 7, 0), utc(2024, 3, 11, 6, 30)],
        id="new-york-spring-daily-in-gap",
    ),
    pytest.param(
        Cron("0 30 * * * ?", tz=NEW_YORK),
        utc(2024, 11, 3, 4),
        [
            utc(2024, 11, 3, 4, 30),  # 00:30 EDT
            utc(2024, 11, 3, 5, 30),  # 01:30 EDT, the first 01:30
            utc(2024, 11, 3, 7, 30),  # 02:30 EST; 01:30 EST (06:30Z) is not run
            utc(2024, 11, 3, 8, 30),
        ],
        id="new-york-autumn-hourly-repeated-hour-runs-once",
    ),
    pytest.param(
        Daily("01:30", tz=NEW_YORK),
        utc(2024, 11, 2, 12),
        [utc(2024, 11, 3, 5, 30), utc(2024, 11, 4, 6, 30)],
        id="new-york-autumn-daily-repeated-time-runs-once",
    ),
    pytest.param(
        Daily("02:15", tz=LORD_HOWE),
        utc(2024, 10, 4, 12),
        [utc(2024, 10, 4, 15, 45), utc(2024, 10, 5, 15, 30), utc(2024, 10, 6, 15, 15)],
        id="lord-howe-half-hour-gap",
    ),
    pytest.param(
        Cron("0 45 1 * * ?", tz=LORD_HOWE),
        utc(2024, 4, 5, 12),
        [utc(2024, 4, 5, 14, 45), utc(2024, 4, 6, 14, 45), utc(2024, 4, 7, 15, 15)],
        id="lord-howe-half-hour-repeat",
    ),
    pytest.param(
        Cron("0 0 9 * * ?", tz=KOLKATA),
        utc(2024, 1, 1),
        [utc(2024, 1, 1, 3, 30), utc(2024, 1, 2, 3, 30)],
        id="kolkata-january",
    ),
    pytest.param(
        Cron("0 0 9 * * ?", tz=KOLKATA),
        utc(2024, 7, 1),
        [utc(2024, 7, 1, 3, 30), utc(2024, 7, 2, 3, 30)],
        id="kolkata-july-same-offset",
    ),
    pytest.param(
        Daily("23:45", tz=KOLKATA),
        utc(2024, 3, 31, 12),
        [utc(2024, 3, 31, 18, 15), utc(2024, 4, 1, 18, 15)],
        id="kolkata-daily",
    ),
]


@pytest.mark.parametrize(("schedule", "start", "expected"), PINNED)
def test_dst_pinned(schedule: Schedule, start: datetime, expected: list[datetime]) -> None:
    assert runs(schedule, start, len(expected)) == expected


@pytest.mark.parametrize(
    ("completed_at", "expected"),
    [
        (utc(2024, 10, 27, 0, 45), utc(2024, 10, 27, 2, 30)),  # 02:45 CEST, first pass
        (utc(2024, 10, 27, 1, 0), utc(2024, 10, 27, 2, 30)),  # 02:00 CET, second pass begins
        (utc(2024, 10, 27, 1, 15), utc(2024, 10, 27, 2, 30)),  # 02:15 CET
        (utc(2024, 10, 27, 1, 30), utc(2024, 10, 27, 2, 30)),  # the second 02:30 itself
        (utc(2024, 10, 27, 1, 59, 59), utc(2024, 10, 27, 2, 30)),
    ],
)
def test_berlin_autumn_second_pass_of_repeated_hour_is_skipped(
    completed_at: datetime, expected: datetime
) -> None:
    for schedule in (Cron("0 30 * * * ?", tz=BERLIN), Daily("02:30", "03:30", tz=BERLIN)):
        assert after(schedule, completed_at) == expected


def test_every_second_cron_skips_the_repeated_hour_in_one_step() -> None:
    schedule = Cron("* * * * * *", tz=BERLIN)
    assert after(schedule, utc(2024, 10, 27, 0, 59, 59)) == utc(2024, 10, 27, 2, 0, 0)
    assert after(schedule, utc(2024, 10, 27, 1, 30)) == utc(2024, 10, 27, 2, 0, 0)
    assert runs(schedule, utc(2024, 3, 31, 0, 59, 58), 3) == [
        utc(2024, 3, 31, 0, 59, 59),
        utc(2024, 3, 31, 1, 0, 0),
        utc(2024, 3, 31, 1, 0, 1),
    ]


@pytest.mark.parametrize(
    ("moment", "zone", "expected"),
    [
        # In the second pass of a repeated hour the search starts where the repetition ends.
        (utc(2024, 10, 27, 1, 0), BERLIN, datetime(2024, 10, 27, 2, 59, 59, 999999)),
        (utc(2024, 10, 27, 1, 59, 59), BERLIN, datetime(2024, 10, 27, 2, 59, 59, 999999)),
        (utc(2024, 11, 3, 6, 30), NEW_YORK, datetime(2024, 11, 3, 1, 59, 59, 999999)),
        (utc(2024, 4, 6, 15, 10), LORD_HOWE, datetime(2024, 4, 7, 1, 59, 59, 999999)),
        # Elsewhere it is the local wall time.
        (utc(2024, 10, 27, 0, 30), BERLIN, datetime(2024, 10, 27, 2, 30)),
        (utc(2024, 10, 27, 2, 0), BERLIN, datetime(2024, 10, 27, 3, 0)),
        (utc(2024, 3, 31, 1, 0), BERLIN, datetime(2024, 3, 31, 3, 0)),
    ],
)
def test_search_start(moment: datetime, zone: str, expected: datetime) -> None:
    assert _wall_clock_start(moment, ZoneInfo(zone)) == expected


def test_cron_every_minute_at_second_zero() -> None:
    schedule = Cron("0 * * ? * *")
    assert after(schedule, utc(2024, 1, 1, 0, 0, 30)) == utc(2024, 1, 1, 0, 1, 0)
    assert after(schedule, utc(2024, 1, 1, 0, 1, 0)) == utc(2024, 1, 1, 0, 2, 0)
    assert after(schedule, utc(2024, 1, 1, 0, 0, 59, 999999)) == utc(2024, 1, 1, 0, 1, 0)
    assert Cron("* * * * * *").first_run(utc(2024, 1, 1, 12, 0, 0, 500000)) == utc(
        2024, 1, 1, 12, 0, 1
    )


def test_five_field_cron_pinned() -> None:
    assert after(Cron("*/5 * * * *"), utc(2024, 1, 1, 0, 0, 30)) == utc(2024, 1, 1, 0, 5)
    assert after(Cron("*/5 * * * *"), utc(2024, 1, 1, 0, 5)) == utc(2024, 1, 1, 0, 10)


def test_aware_inputs_in_other_zones_come_back_in_utc() -> None:
    rome = datetime(2024, 6, 1, 12, 0, tzinfo=ZoneInfo("Europe/Rome"))  # 10:00Z
    assert assert_utc(after(FixedDelay("1m"), rome)) == utc(2024, 6, 1, 10, 1)
    assert assert_utc(after(FixedRate("1m"), rome)) == utc(2024, 6, 1, 10, 1)
    assert assert_utc(FixedRate("1m", initial_delay="5s").first_run(rome)) == utc(
        2024, 6, 1, 10, 0, 5
    )
    assert assert_utc(after(Cron("0 0 * * * ?"), rome)) == utc(2024, 6, 1, 11)
    assert assert_utc(after(Daily("12:00", tz="Europe/Rome"), rome)) == utc(2024, 6, 2, 10)


def test_fixed_rate_examples() -> None:
    schedule = FixedRate("10m")
    on_time = schedule.next_run(
        scheduled_at=utc(2024, 1, 1, 12), completed_at=utc(2024, 1, 1, 12, 3)
    )
    assert on_time == utc(2024, 1, 1, 12, 10)
    late = schedule.next_run(scheduled_at=utc(2024, 1, 1, 12), completed_at=utc(2024, 1, 1, 12, 25))
    assert late == utc(2024, 1, 1, 12, 35)  # no catch-up runs at 12:10 and 12:20
    exactly = schedule.next_run(
        scheduled_at=utc(2024, 1, 1, 12), completed_at=utc(2024, 1, 1, 12, 10)
    )
    assert exactly == utc(2024, 1, 1, 12, 20)


def test_fixed_delay_examples() -> None:
    schedule = FixedDelay("30s", initial_delay="1h")
    assert schedule.first_run(utc(2024, 1, 1)) == utc(2024, 1, 1, 1)
    result = schedule.next_run(scheduled_at=utc(2024, 1, 1), completed_at=utc(2024, 1, 1, 0, 5))
    assert result == utc(2024, 1, 1, 0, 5, 30)


# --------------------------------------------------------------------------- text forms


@pytest.mark.parametrize(
    ("schedule", "text"),
    [
        (FixedDelay("30s"), "FIXED_DELAY|30s"),
        (FixedDelay(timedelta(seconds=30)), "FIXED_DELAY|30s"),
        (FixedDelay("1h30m", initial_delay=timedelta(milliseconds=250)), "FIXED_DELAY|1h30m|250ms"),
        (FixedRate(timedelta(minutes=1)), "FIXED_RATE|1m"),
        (FixedRate("1m", initial_delay="10s"), "FIXED_RATE|1m|10s"),
        (FixedRate("90s", initial_delay="0s"), "FIXED_RATE|1m30s"),
        (FixedRate(timedelta(days=14)), "FIXED_RATE|14d"),
        (Daily(time(15, 30), "12:30", tz="Europe/Rome"), "DAILY|12:30,15:30|Europe/Rome"),
        (Daily("12:30"), "DAILY|12:30"),
        (Daily("9:05", tz="UTC"), "DAILY|09:05"),
        (Daily(time(7, 0, 5), "07:00"), "DAILY|07:00,07:00:05"),
        (Cron("0 0 * * * ?"), "CRON|0 0 * * * ?"),
        (Cron("  0  0 *\t* * ?  ", tz=BERLIN), "CRON|0 0 * * * ?|Europe/Berlin"),
        (Cron("*/5 * * * *"), "CRON|*/5 * * * *"),
        (Disabled(), "-"),
    ],
)
def test_text_forms(schedule: Schedule, text: str) -> None:
    assert schedule.text == text
    assert str(schedule) == text
    assert parse_schedule(text) == schedule


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("  fixed_delay|30s  ", FixedDelay("30s")),
        ("Fixed_Rate|1m|0s", FixedRate("1m")),
        ("fixed_rate | 1m | 10s", FixedRate("1m", initial_delay="10s")),
        ("daily|9:05", Daily(time(9, 5))),
        ("DAILY|15:30, 12:30, 15:30|UTC", Daily("12:30", "15:30")),
        ("cron|0 0 12 ? * MON-FRI|Europe/Berlin", Cron("0 0 12 ? * MON-FRI", tz=BERLIN)),
        ("CRON|0  0 * * * ?|UTC", Cron("0 0 * * * ?")),
        ("\t-\n", Disabled()),
    ],
)
def test_parse_is_forgiving(text: str, expected: Schedule) -> None:
    assert parse_schedule(text) == expected


def test_values_are_normalized() -> None:
    assert FixedRate("90s").every == timedelta(seconds=90)
    assert FixedRate("90s").initial_delay == timedelta(0)
    assert FixedDelay("250ms", initial_delay="1m").initial_delay == timedelta(minutes=1)
    daily = Daily("15:30", time(12, 30), "12:30:00", times=["08:00"], tz="Europe/Rome")
    assert daily.times == (time(8), time(12, 30), time(15, 30))
    assert daily == Daily(times=("08:00", "12:30", "15:30"), tz="Europe/Rome")
    assert Cron("0 0  * * * ?") == Cron("0 0 * * * ?")
    assert Cron("0 0 * * * ?").tz == "UTC"


def test_schedules_are_frozen_slotted_hashable_values() -> None:
    schedules: list[Cron | FixedRate | FixedDelay | Daily | Disabled] = [
        Cron("0 0 * * * ?", tz=BERLIN),
        FixedRate("1m", initial_delay="5s"),
        FixedDelay("30s"),
        Daily("12:00", tz=KOLKATA),
        Disabled(),
    ]
    for schedule in schedules:
        assert not hasattr(schedule, "__dict__")
        assert pickle.loads(pickle.dumps(schedule)) == schedule
        assert dataclasses.replace(schedule) == schedule
    assert len({*schedules, *map(dataclasses.replace, schedules)}) == len(schedules)
    with pytest.raises(dataclasses.FrozenInstanceError):
        FixedRate("1m").every = timedelta(seconds=1)  # type: ignore[misc]
    assert dataclasses.replace(Daily("12:00"), tz="Europe/Rome").text == "DAILY|12:00|Europe/Rome"
    assert parse_schedule("FIXED_RATE|1m") != parse_schedule("FIXED_DELAY|1m")


def test_deterministic_flags() -> None:
    assert Cron("0 0 * * * ?").deterministic
    assert Daily("12:00").deterministic
    assert not FixedRate("1m").deterministic
    assert not FixedDelay("1m").deterministic
    assert not Disabled().deterministic


def test_disabled_never_runs() -> None:
    assert Disabled().first_run(utc(2024, 1, 1)) is None
    with pytest.raises(InvalidScheduleError):
        after(Disabled(), utc(2024, 1, 1))


# --------------------------------------------------------------------------- invalid input

INVALID: list[tuple[Callable[[], object], str]] = [
    (lambda: FixedRate(timedelta(0)), "FixedRate.every"),
    (lambda: FixedRate(timedelta(seconds=-1)), str(timedelta(seconds=-1))),
    (lambda: FixedRate("-1s"), "'-1s'"),
    (lambda: FixedRate("0s"), "'0s'"),
    (lambda: FixedRate("soon"), "'soon'"),
    (lambda: FixedRate("1m", initial_delay=timedelta(seconds=-5)), "FixedRate.initial_delay"),
    (lambda: FixedRate(-60), "-60"),
    (lambda: FixedRate(True), "True"),  # a bool is not a number of seconds
    (lambda: FixedDelay(float("nan")), "nan"),
    (lambda: FixedDelay("1s", 0 - 1.5), "-1.5"),
    (lambda: FixedDelay(timedelta(0)), "FixedDelay.after"),
    (lambda: FixedDelay("0ms"), "'0ms'"),
    (lambda: FixedDelay("1s", initial_delay="-2s"), "'-2s'"),
    (lambda: Cron("61 * * * *"), "'61 * * * *'"),
    (lambda: Cron("0 0 0 * * ? 2024"), "'0 0 0 * * ? 2024'"),
    (lambda: Cron("0 0 0 30 2 ?"), "'0 0 0 30 2 ?'"),
    (lambda: Cron("0 0 0 31 4 ?"), "'0 0 0 31 4 ?'"),
    (lambda: Cron(""), "''"),
    (lambda: Cron("* * * *"), "'* * * *'"),
    (lambda: Cron("@hourly"), "'@hourly'"),
    (lambda: Cron("0 R * * * ?"), "'0 R * * * ?'"),
    (lambda: Cron("H * * * *"), "'H * * * *'"),
    (lambda: Cron("0 0 12 ? * FOO"), "'0 0 12 ? * FOO'"),
    (lambda: Cron("0 0 * * * ?", tz="Mars/Base"), "'Mars/Base'"),
    (lambda: Cron("0 0 * * * ?", tz=""), "Cron.tz"),
    (lambda: Daily(), "at least one"),
    (lambda: Daily("25:00"), "'25:00'"),
    (lambda: Daily("12:60"), "'12:60'"),
    (lambda: Daily("noon"), "'noon'"),
    (lambda: Daily(time(12, tzinfo=UTC)), "tzinfo"),
    (lambda: Daily(time(12, 0, 0, 5)), "time(12, 0, 0, 5)"),
    (lambda: Daily("12:00", tz="Mars/Base"), "'Mars/Base'"),
]


@pytest.mark.parametrize(("build", "needle"), INVALID)
def test_invalid_arguments(build: Callable[[], object], needle: str) -> None:
    with pytest.raises(InvalidScheduleError) as info:
        build()
    assert needle in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "--",
        "CRON",
        "CRON|",
        "CRON|61 * * * *",
        "CRON|0 0 0 * * ? 2024",
        "CRON|0 0 0 30 2 ?",
        "CRON|0 0 * * * ?|Mars/Base",
        "CRON|0 0 * * * ?|",
        "CRON|0 0 * * * ?|UTC|x",
        "FOO|1s",
        "FIXED_RATE",
        "FIXED_RATE|0s",
        "FIXED_RATE|1m|10s|5s",
        "FIXED_RATE|1m|",
        "FIXED_DELAY|-5s",
        "FIXED_DELAY|often",
        "DAILY|",
        "DAILY|25:00",
        "DAILY|12:00,",
        "DAILY|12:00|Mars/Base",
        "-|1s",
    ],
)
def test_invalid_text(text: str) -> None:
    with pytest.raises(InvalidScheduleError) as info:
        parse_schedule(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize(
    "schedule",
    [Cron("0 0 * * * ?"), FixedRate("1m"), FixedDelay("1m"), Daily("12:00"), Disabled()],
)
def test_naive_datetimes_are_rejected(schedule: Schedule) -> None:
    naive = datetime(2024, 1, 1, 12)
    aware = utc(2024, 1, 1, 12)
    with pytest.raises(ValueError, match="now must be timezone-aware"):
        schedule.first_run(naive)
    with pytest.raises(ValueError, match="completed_at must be timezone-aware"):
        schedule.next_run(scheduled_at=aware, completed_at=naive)
    with pytest.raises(ValueError, match="scheduled_at must be timezone-aware"):
        schedule.next_run(scheduled_at=naive, completed_at=aware)


def test_durations_may_be_numbers_of_seconds_and_delays_positional() -> None:
    assert FixedRate(60) == FixedRate("1m")
    assert FixedRate("1m", 0).initial_delay == timedelta(0)
    assert FixedDelay(1.5, 30) == FixedDelay("1500ms", initial_delay="30s")
    assert FixedDelay("1s", initial_delay=0).text == "FIXED_DELAY|1s"


def test_cron_takes_its_time_zone_by_position() -> None:
    assert Cron("0 0 9 * * ?", "Europe/Rome") == Cron("0 0 9 * * ?", tz="Europe/Rome")
