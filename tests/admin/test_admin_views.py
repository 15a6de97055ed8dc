"""What the admin page computes without a database: schedules in words, heartbeat health."""

from __future__ import annotations

import inspect
from datetime import timedelta

import pytest

import sqla_scheduler.admin as admin
from sqla_scheduler import SchedulerConfig
from sqla_scheduler.admin._views import describe_schedule, heartbeat_health, relative
from tests.support import NOW


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("CRON|0 */15 * * * ?", "Every 15 minutes"),
        ("CRON|*/5 * * * *", "Every 5 minutes"),
        (
            "CRON|0 30 2 * * MON-FRI|Europe/Berlin",
            "At 02:30, Monday through Friday (Europe/Berlin)",
        ),
        ("FIXED_RATE|1h30m", "Every 1h30m"),
        ("FIXED_RATE|1m|10s", "Every 1m, first after 10s"),
        ("FIXED_DELAY|30s", "30s after each run completes"),
        ("DAILY|12:30,15:30:15|Europe/Rome", "Daily at 12:30, 15:30:15 (Europe/Rome)"),
        ("DAILY|08:00", "Daily at 08:00"),
        ("-", "Disabled"),
        ("NOT A SCHEDULE", "NOT A SCHEDULE"),  # falls back to the raw text
        ("CRON|<b>", "CRON|<b>"),
    ],
)
def test_schedules_in_words(text: str, words: str) -> None:
    assert describe_schedule(text) == words


def test_no_schedule_has_no_words() -> None:
    assert describe_schedule(None) is None


def test_heartbeat_health() -> None:
    config = SchedulerConfig(heartbeat_interval=timedelta(minutes=1), missed_heartbeat_limit=6)
    assert heartbeat_health(None, NOW, config) is None
    assert heartbeat_health(NOW - timedelta(seconds=30), NOW, config) == "ok"
    assert heartbeat_health(NOW - timedelta(minutes=2), NOW, config) == "ok"
    assert heartbeat_health(NOW - timedelta(minutes=2, seconds=1), NOW, config) == "late"
    assert heartbeat_health(NOW - timedelta(minutes=6), NOW, config) == "late"
    assert heartbeat_health(NOW - timedelta(minutes=6, seconds=1), NOW, config) == "dead"
    # When dead_after is shorter than two intervals, past it is dead, never merely late.
    tight = SchedulerConfig(heartbeat_interval=timedelta(minutes=1), missed_heartbeat_limit=1)
    assert heartbeat_health(NOW - timedelta(seconds=90), NOW, tight) == "dead"


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=0), "0 s"),
        (timedelta(seconds=59), "59 s"),
        (timedelta(minutes=12, seconds=5), "12 min"),
        (timedelta(hours=2), "2 h"),
        (timedelta(hours=2, minutes=5), "2 h 5 min"),
        (timedelta(days=3), "3 d"),
        (timedelta(days=3, hours=4), "3 d 4 h"),
        (-timedelta(minutes=5), "5 min"),
    ],
)
def test_relative(delta: timedelta, text: str) -> None:
    assert relative(delta) == text


def test_public_surface() -> None:
    public = {
        name
        for name, value in vars(admin).items()
        if not name.startswith("_")
        and inspect.isfunction(value)
        and value.__module__.startswith("sqla_scheduler.admin")
    }
    assert admin.__all__ == sorted(admin.__all__)
    assert (
        set(admin.__all__)
        == public
        == {
            "create_app",
            "create_wsgi_app",
            "credentials_from_env",
            "serve",
        }
    )
    for name in admin.__all__:
        assert (getattr(admin, name).__doc__ or "").strip(), f"{name} has no docstring"
