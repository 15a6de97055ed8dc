"""NOTIFY payloads, as a listening scheduler reads them: which task, and when it is due;
and a scheduler wakes for its own tasks only."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from sqla_scheduler._dialects import (
    notice_of_check,
    notice_of_later,
    notice_of_pause,
    read_check_notice,
    read_notice,
    read_pause_notice,
)
from sqla_scheduler._runner.listener import Listener
from sqla_scheduler._runner.waker import Waker
from sqla_scheduler.clock import ManualClock

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("payload", "notice"),
    [
        ("send-email", ("send-email", None)),
        (notice_of_later("invoice", NOW), ("invoice", NOW)),
        # PostgreSQL's own json_build_object, as the INSERT's NOTIFY writes it
        ('{"task" : "invoice", "at" : "2026-12-03T12:00:00+00:00"}', ("invoice", NOW)),
        # tasks named like JSON objects are due now, under their whole name
        ('{"task": "x"}', ('{"task": "x"}', None)),
        (
            '{"task": "x", "at": "2026-12-03T12:00:00"}',
            ('{"task": "x", "at": "2026-12-03T12:00:00"}', None),
        ),
        (
            '{"task": 1, "at": "2026-12-03T12:00:00+00:00"}',
            ('{"task": 1, "at": "2026-12-03T12:00:00+00:00"}', None),
        ),
        ("{not json", ("{not json", None)),
    ],
)
def test_a_notice_names_its_task_and_time(payload: str, notice: tuple[str, datetime | None]):
    assert read_notice(payload) == notice


def _listener(
    waker: Waker,
    names: list[str],
    *,
    wants_work: bool = True,
    paused: list[tuple[str, bool]] | None = None,
) -> Listener:
    db: Any = None  # never connects: only its notifications are fed in
    heard = paused if paused is not None else []
    return Listener(
        db,
        None,  # type: ignore[arg-type]
        waker,
        names=names,
        wants_work=lambda: wants_work,
        polling_interval=timedelta(seconds=10),
        on_pause=lambda task, is_paused: heard.append((task, is_paused)),
    )


@pytest.mark.anyio
async def test_a_scheduler_wakes_for_its_own_tasks_only():
    waker = Waker(ManualClock(NOW))
    listener = _listener(waker, ["invoice"])
    waker.arm()
    listener._on_notify("send-email")
    listener._on_notify(notice_of_later("send-email", NOW + timedelta(seconds=1)))
    assert not await waker.wait(0)
    assert waker.next_at is None

    listener._on_notify(notice_of_later("invoice", NOW + timedelta(seconds=1)))
    assert waker.next_at == NOW + timedelta(seconds=1)
    assert waker.retimed  # a time ahead, not work due now
    waker.arm()
    listener._on_notify("invoice")
    assert await waker.wait(0)
    assert not waker.retimed


@pytest.mark.parametrize(
    ("payload", "pause"),
    [
        (notice_of_pause("invoice", True), ("invoice", True)),
        (notice_of_pause('in"voice', False), ('in"voice', False)),
        ("invoice", None),
        (notice_of_later("invoice", NOW), None),
        ('{"task": "invoice", "paused": 1}', None),
        ('{"paused": true}', None),
    ],
)
def test_a_pause_notice_names_its_task_and_whether_it_was_paused(
    payload: str, pause: tuple[str, bool] | None
):
    assert read_pause_notice(payload) == pause


@pytest.mark.anyio
async def test_a_pause_or_resume_of_its_own_tasks_reaches_the_scheduler():
    waker = Waker(ManualClock(NOW))
    heard: list[tuple[str, bool]] = []
    listener = _listener(waker, ["invoice"], paused=heard)
    waker.arm()
    listener._on_notify(notice_of_pause("send-email", True))  # not its task
    listener._on_notify(notice_of_pause("invoice", True))
    assert not await waker.wait(0)  # a pause is no work
    listener._on_notify(notice_of_pause("invoice", False))
    assert await waker.wait(0)  # a resume is: its due executions may be picked
    assert heard == [("invoice", True), ("invoice", False)]


def test_a_check_notice_is_news_of_no_task():
    """Every listener of the table hears another's check: none may take it for work."""
    payload = notice_of_check("5f3a9c")
    assert read_check_notice(payload) == "5f3a9c"
    assert read_pause_notice(payload) is None
    task, at = read_notice(payload)
    assert at is None
    assert task == payload  # a "task" no scheduler runs
    assert read_check_notice('{"task": "x", "at": "2026-01-01T00:00:00+00:00"}') is None
    assert read_check_notice('{"check": 7}') is None
