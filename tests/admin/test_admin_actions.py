"""Actions (run now, retry, delete, cancel): off by default, CSRF-checked, version-checked,
logged; run now and retry are ``Scheduler.run_now``'s operation, delete and cancel
``Scheduler.cancel``'s (cancel asks the process running an execution to stop it)."""

from __future__ import annotations

import logging
import re
import threading
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from starlette.applications import Starlette
from starlette.routing import Mount

from sqla_scheduler import ManualClock, Scheduler, one_time
from sqla_scheduler.admin import create_app
from sqla_scheduler.admin._security import csrf_token
from sqla_scheduler.models import table_for
from tests.support import NOW, Harness, wait_for
from tests.support.admin import PASSWORD, SECRET, TOKEN, USER, XSS, AppFactory, client_for

# the admin reads and acts through the same bridge with either engine; its SQL
# (previews, counts, pages) is the same for a database's two drivers
pytestmark = [pytest.mark.anyio, pytest.mark.databases(async_on=["postgresql"])]


def row(db: Harness, task: str, instance: str) -> dict[str, Any] | None:
    """The row as it is in the table now."""
    table = table_for()
    with db.sync_engine.connect() as conn:
        found = conn.execute(
            select(table).where(table.c.task_name == task, table.c.task_instance == instance)
        ).one_or_none()
    return None if found is None else dict(found._mapping)


def form(task: str, instance: str, version: int, **extra: str) -> dict[str, str]:
    return {
        "csrf": TOKEN,
        "task": task,
        "instance": instance,
        "version": str(version),
        "back": "/executions?state=failing&page=1",
        **extra,
    }


async def test_the_page_offers_each_action_with_token_and_version(
    actions: httpx.AsyncClient,
) -> None:
    html = (await actions.get("/")).text
    assert "actions enabled" in html
    forms = re.findall(r'<form method="post" action="([^"]+)".*?</form>', html, re.S)
    # On executions, and Pause on each task (none is paused).
    assert {
        "/actions/run-now",
        "/actions/retry",
        "/actions/delete",
        "/actions/cancel",
        "/actions/pause",
    } == set(forms)
    bounce = re.search(
        r'<form method="post" action="/actions/retry".*?value="bounce-3".*?</form>', html, re.S
    )
    assert bounce is not None
    assert f'name="csrf" value="{TOKEN}"' in bounce.group(0)
    assert 'name="version" value="1"' in bounce.group(0)
    # The overview's running list has no controls; the running ones' listing offers Cancel,
    # the one thing a running execution can be asked (its process is asked to stop it).
    running = re.search(r'<section id="running".*?</section>', html, re.S)
    assert running is not None
    assert "<form" not in running.group(0)
    listing = (await actions.get("/executions?state=running")).text
    assert set(re.findall(r'<form method="post" action="([^"]+)"', listing)) == {"/actions/cancel"}


async def test_run_now_moves_the_execution_to_now_and_logs_it(
    actions: httpx.AsyncClient, seeded: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    before = row(seeded, "nightly-report", "recurring")
    assert before is not None
    assert before["execution_time"] > NOW
    with caplog.at_level(logging.INFO, logger="sqla_scheduler.admin"):
        response = await actions.post(
            "/actions/run-now", data=form("nightly-report", "recurring", before["version"])
        )
    assert response.status_code == 303
    assert response.headers["location"] == "/executions?state=failing&page=1&done=run-now"
    after = row(seeded, "nightly-report", "recurring")
    assert after is not None
    assert after["execution_time"] == NOW
    assert after["version"] == before["version"] + 1
    [record] = [r for r in caplog.records if r.name == "sqla_scheduler.admin"]
    assert record.levelno == logging.INFO
    message = record.getMessage()
    assert "run-now" in message
    assert repr(USER) in message
    assert "'nightly-report'" in message
    assert "'recurring'" in message
    assert record.__dict__["admin_user"] == USER
    assert record.__dict__["done"] is True
    page = await actions.get(response.headers["location"])
    assert "Done: the execution was rescheduled to now." in page.text


@pytest.mark.parametrize("action", ["run-now", "retry"])
async def test_run_now_wakes_the_scheduler_of_its_process_as_run_now_does(
    db: Harness, action: str
) -> None:
    """``Scheduler.run_now`` tells a loop running in its process of the time it set, on
    commit: a loop that hears no NOTIFY (``listen=False``; SQLite) starts the execution at
    once, not at its next poll. The admin page's run now and retry are that operation."""
    started = threading.Event()

    @one_time("report")
    def report(ctx: Any) -> None:
        started.set()

    scheduler = db.scheduler([report], listen=False, polling_interval=timedelta(hours=1))
    later = scheduler.clock.now() + timedelta(days=1)
    await db.resolve(scheduler.schedule(db.engine, report.instance("r1", at=later)))
    app = create_app(scheduler, username=USER, password=PASSWORD, actions=True, secret=SECRET)
    async with scheduler, client_for(app) as client:
        response = await client.post("/actions/" + action, data=form("report", "r1", 1))
        assert response.status_code == 303, response.text
        # Due in a day, polled hourly: only the commit's wake-up starts it this soon.
        await wait_for(started.is_set, deadline=10)


async def test_retry_reschedules_a_failing_execution_keeping_its_failures(
    actions: httpx.AsyncClient, seeded: Harness
) -> None:
    response = await actions.post("/actions/retry", data=form("send-email", XSS, 1))
    assert response.status_code == 303
    after = row(seeded, "send-email", XSS)
    assert after is not None
    assert (after["execution_time"], after["consecutive_failures"], after["version"]) == (
        NOW,
        2,
        2,
    )


async def test_delete_removes_the_execution(actions: httpx.AsyncClient, seeded: Harness) -> None:
    response = await actions.post("/actions/delete", data=form("legacy-import", "batch-2019", 1))
    assert response.status_code == 303
    assert row(seeded, "legacy-import", "batch-2019") is None


@pytest.mark.parametrize(
    "token", [None, "", "0" * 64, TOKEN[:-1], csrf_token(SECRET, "someone-else"), TOKEN.upper()]
)
async def test_a_missing_or_wrong_csrf_token_is_refused(
    actions: httpx.AsyncClient, seeded: Harness, token: str | None
) -> None:
    data = form("send-email", "welcome-1", 1)
    if token is None:
        del data["csrf"]
    else:
        data["csrf"] = token
    before = row(seeded, "send-email", "welcome-1")
    for action in ("run-now", "retry", "delete"):
        response = await actions.post(f"/actions/{action}", data=data)
        assert response.status_code == 403
    assert row(seeded, "send-email", "welcome-1") == before


async def test_tokens_of_another_app_are_refused(seeded: Harness, make_app: AppFactory) -> None:
    async with client_for(make_app(actions=True)) as other:  # a random secret of its own
        response = await other.post("/actions/delete", data=form("send-email", "welcome-1", 1))
    assert response.status_code == 403
    assert row(seeded, "send-email", "welcome-1") is not None


async def test_a_stale_version_changes_nothing(
    actions: httpx.AsyncClient, seeded: Harness, scheduler: Scheduler
) -> None:
    # Someone else moved the execution after the page was shown at version 1.
    moved = await seeded.resolve(
        scheduler.reschedule(seeded.engine, "send-email", "bounce-3", NOW + timedelta(days=1))
    )
    assert moved
    before = row(seeded, "send-email", "bounce-3")
    assert before is not None
    assert before["version"] == 2
    for action in ("retry", "run-now", "delete"):
        response = await actions.post(f"/actions/{action}", data=form("send-email", "bounce-3", 1))
        assert response.status_code == 409
        assert "version 1 was shown, it is now at 2" in response.text
        assert row(seeded, "send-email", "bounce-3") == before


async def test_a_running_execution_cannot_be_changed(
    actions: httpx.AsyncClient, seeded: Harness
) -> None:
    before = row(seeded, "send-email", "welcome-2")
    assert before is not None
    assert before["picked"]
    for action in ("run-now", "delete"):
        response = await actions.post(
            f"/actions/{action}", data=form("send-email", "welcome-2", before["version"])
        )
        assert response.status_code == 409
        assert "worker-1" in response.text
    assert row(seeded, "send-email", "welcome-2") == before


async def test_cancel_asks_the_process_running_an_execution_to_stop_it(
    actions: httpx.AsyncClient, seeded: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    before = row(seeded, "send-email", "welcome-2")
    assert before is not None
    with caplog.at_level(logging.INFO, logger="sqla_scheduler.admin"):
        response = await actions.post(
            "/actions/cancel", data=form("send-email", "welcome-2", before["version"])
        )
    assert response.status_code == 303, response.text
    after = row(seeded, "send-email", "welcome-2")
    assert after is not None  # its worker records the outcome when it has stopped
    assert after["stop_requested_at"] == NOW
    assert after["version"] == before["version"]
    [record] = [r for r in caplog.records if r.name == "sqla_scheduler.admin"]
    assert "cancel" in record.getMessage()
    page = await actions.get(response.headers["location"])
    assert "Done: the execution was cancelled (a running one is asked to stop" in page.text
    shown = (await actions.get("/execution?task=send-email&instance=welcome-2")).text
    assert "Stop requested" in shown
    assert "stopping" in shown
    assert 'action="/actions/cancel"' not in shown  # asked already
    again = await actions.post(
        "/actions/cancel", data=form("send-email", "welcome-2", before["version"])
    )
    assert again.status_code == 409
    assert "worker-1 was asked to stop the execution already" in again.text
    # one that is not running is removed, as delete does
    response = await actions.post("/actions/cancel", data=form("send-email", "welcome-1", 1))
    assert response.status_code == 303
    assert row(seeded, "send-email", "welcome-1") is None


async def test_a_vanished_execution_is_not_found(actions: httpx.AsyncClient) -> None:
    response = await actions.post("/actions/delete", data=form("send-email", "never", 1))
    assert response.status_code == 404


@pytest.mark.parametrize(
    "back", ["//evil.example/x", "https://evil.example/", "/\\evil.example", "executions", ""]
)
async def test_the_return_address_stays_in_the_app(actions: httpx.AsyncClient, back: str) -> None:
    data = form("send-email", "welcome-1", 1, back=back)
    response = await actions.post("/actions/run-now", data=data)
    assert response.status_code == 303
    assert response.headers["location"] == "/?done=run-now"


async def test_malformed_action_requests(actions: httpx.AsyncClient, seeded: Harness) -> None:
    good = form("send-email", "welcome-1", 1)
    assert (await actions.post("/actions/explode", data=good)).status_code == 404
    assert (await actions.post("/actions/run-now", json=good)).status_code == 415
    for bad in ({"version": "x"}, {"version": ""}, {"version": "-1"}, {"task": ""}):
        response = await actions.post("/actions/run-now", data={**good, **bad})
        assert response.status_code == 400, bad
    too_big = {**good, "padding": "x" * 20_000}
    assert (await actions.post("/actions/run-now", data=too_big)).status_code == 413
    assert (await actions.post("/")).status_code == 405
    assert (await actions.put("/actions/run-now", data=good)).status_code == 405
    assert row(seeded, "send-email", "welcome-1") is not None


async def test_actions_redirect_within_the_mount_point(
    seeded: Harness, make_app: AppFactory
) -> None:
    outer = Starlette(routes=[Mount("/admin/jobs", app=make_app(actions=True, secret=SECRET))])
    async with client_for(outer) as client:
        html = (await client.get("/admin/jobs/executions?state=failing")).text
        assert 'action="/admin/jobs/actions/retry"' in html
        assert 'name="back" value="/executions?state=failing"' in html
        response = await client.post(
            "/admin/jobs/actions/retry",
            data=form("send-email", "bounce-4", 1, back="/executions?state=failing"),
        )
    assert response.status_code == 303
    assert response.headers["location"] == "/admin/jobs/executions?state=failing&done=retry"


async def test_a_nul_in_a_form_is_a_400(actions: httpx.AsyncClient, seeded: Harness) -> None:
    response = await actions.post("/actions/retry", data=form("send-email", "a\x00b", 1))
    assert response.status_code == 400, response.text
    assert "NUL character" in response.text


async def test_delete_keeps_the_result_of_a_task_that_keeps_results(db: Harness) -> None:
    """The page's delete is ``Scheduler.cancel``'s: a task with ``keep_result`` keeps
    ``cancelled`` at the scheduler's clock's time, so that a waiter on the result is
    answered at once rather than at its timeout; a group's member is kept as cancelled at
    that time too, and counted as finished (its group's callback is due then)."""
    report = one_time("report", keep_result=True)(lambda ctx: "sent")
    step = one_time("step")(lambda ctx: None)
    clock = ManualClock(NOW)
    scheduler = db.scheduler([report, step], clock)
    later = NOW + timedelta(days=1)
    await db.resolve(scheduler.schedule(db.engine, report.instance("alone", at=later)))
    group = await db.resolve(
        scheduler.schedule_group(
            db.engine, [step.instance("member", at=later)], then=report.instance("then")
        )
    )
    clock.advance(timedelta(minutes=5))
    app = create_app(scheduler, username=USER, password=PASSWORD, actions=True, secret=SECRET)
    async with client_for(app) as client:
        for task, instance in (("report", "alone"), ("step", "member")):
            response = await client.post("/actions/delete", data=form(task, instance, 1))
            assert response.status_code == 303, response.text
    kept = await db.resolve(scheduler.wait(db.engine, "report", "alone", timeout=0.5))
    assert (kept.outcome, kept.finished_at) == ("cancelled", NOW + timedelta(minutes=5))
    progress = await db.resolve(scheduler.group(db.engine, group.id))
    assert (progress.remaining, dict(progress.outcomes)) == (0, {"cancelled": 1})
    assert progress.finished_at == NOW + timedelta(minutes=5)
    callback = db.row("report", "then")
    assert callback is not None
    assert callback["execution_time"] == NOW + timedelta(minutes=5)
