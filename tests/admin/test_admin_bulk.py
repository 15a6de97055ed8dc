"""Bulk actions: retry, delete, cancel, pause and requeue for exactly what a filter selects, with
the count shown and confirmed, CSRF-checked, logged, refused when the selection changed
between the confirmation and the POST, absent from a read-only app, bounded in size."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select, text, update

from sqla_scheduler.admin._bulk import MAX_BULK
from sqla_scheduler.models import paused_table, table_for
from tests.support import NOW, Harness
from tests.support.admin import (
    EVERY_DATABASE,
    ONE_DATABASE,
    TOKEN,
    XSS,
    XSS_ESCAPED,
    XSS_TASK,
    foreign_tags,
    seed_history,
)

pytestmark = pytest.mark.anyio


def _rows(db: Harness, *where: Any) -> list[dict[str, Any]]:
    table = table_for()
    with db.sync_engine.connect() as conn:
        found = conn.execute(select(table).where(*where).order_by(table.c.task_instance))
        return [dict(r._mapping) for r in found]


def _form(html: str) -> dict[str, str]:
    """The fields of the confirmation's form."""
    found = re.search(r'<form method="post" action="/bulk/[a-z]+".*?</form>', html, re.S)
    assert found is not None, html
    fields = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', found.group(0))
    return dict(fields)


async def _confirm(client: httpx.AsyncClient, action: str, **params: Any) -> str:
    response = await client.get(f"/bulk/{action}", params=params)
    assert response.status_code == 200, response.text
    return response.text


@EVERY_DATABASE
async def test_bulk_retry_delete_and_requeue_on_every_database(
    actions: httpx.AsyncClient, seeded: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    c = table_for().c
    # the failing list offers the bulk actions; the confirmation counts and asks
    listing = (await actions.get("/executions?state=failing")).text
    assert 'href="/bulk/retry?state=failing"' in listing
    html = await _confirm(actions, "retry", state="failing")
    assert "3 executions will be rescheduled to now for a retry." in html
    form = _form(html)
    assert form == {"csrf": TOKEN, "state": "failing", "count": "3"}
    before = {r["task_instance"]: r["version"] for r in _rows(seeded, c.consecutive_failures > 0)}
    with caplog.at_level(logging.INFO, logger="sqla_scheduler.admin"):
        response = await actions.post("/bulk/retry", data=form)
    assert response.status_code == 303, response.text
    assert response.headers["location"] == "/executions?state=failing&done=bulk-retry&n=3"
    after = _rows(seeded, c.consecutive_failures > 0)
    assert {r["task_instance"]: r["version"] for r in after} == {
        k: v + 1 for k, v in before.items()
    }
    assert all(r["execution_time"] == NOW for r in after)
    [record] = [r for r in caplog.records if getattr(r, "admin_action", "") == "bulk-retry"]
    assert (record.admin_user, record.shown_count, record.done_count) == ("ops", 3, 3)  # type: ignore[attr-defined]
    assert record.filter == {"state": "failing"}  # type: ignore[attr-defined]
    notice = (await actions.get(response.headers["location"])).text
    assert "Done: 3 executions were rescheduled to now for a retry." in notice

    # delete what a filter selects: not the running ones
    html = await _confirm(actions, "delete", task="send-email", instance="welcome")
    assert "1 execution will be deleted." in html  # welcome-2 is running
    response = await actions.post("/bulk/delete", data=_form(html))
    assert response.status_code == 303
    assert [r["task_instance"] for r in _rows(seeded, c.task_name == "send-email")] == sorted(
        ["welcome-2", "invoice-7", XSS, "bounce-3", "bounce-4"]
    )

    # requeue the dead letters the filter selects (not one whose key is in the table)
    seed_history(seeded.sync_engine)
    html = await _confirm(actions, "requeue")
    assert "2 dead letters will be requeued" in html
    response = await actions.post("/bulk/requeue", data=_form(html))
    assert response.status_code == 303
    assert response.headers["location"] == "/dead-letters?done=bulk-requeue&n=2"
    requeued = _rows(seeded, c.task_instance.in_(["batch-2018", "acct-9"]))
    assert [(r["task_instance"], r["execution_time"]) for r in requeued] == [
        ("acct-9", NOW),
        ("batch-2018", NOW),
    ]
    again = await _confirm(actions, "requeue")
    assert "nothing to do" in again
    assert '<form method="post" action="/bulk/' not in again


@EVERY_DATABASE
async def test_bulk_cancel_asks_the_running_ones_to_stop(
    actions: httpx.AsyncClient, seeded: Harness
) -> None:
    c = table_for().c
    listing = (await actions.get("/executions?state=running")).text
    assert 'href="/bulk/cancel?state=running"' in listing
    html = await _confirm(actions, "cancel", state="running", task="send-email")
    assert "2 executions will be asked to stop" in html  # welcome-2 and invoice-7
    response = await actions.post("/bulk/cancel", data=_form(html))
    assert response.status_code == 303, response.text
    asked = _rows(seeded, c.stop_requested_at.is_not(None))
    assert [(r["task_instance"], r["stop_requested_at"]) for r in asked] == [
        ("invoice-7", NOW),
        ("welcome-2", NOW),
    ]
    assert all(r["picked"] for r in asked)  # their workers record the outcomes
    notice = (await actions.get(response.headers["location"])).text
    assert "Done: 2 running executions were asked to stop" in notice
    again = await _confirm(actions, "cancel", state="running", task="send-email")
    assert "nothing to do" in again


@ONE_DATABASE
async def test_a_changed_selection_is_refused_and_nothing_is_done(
    actions: httpx.AsyncClient, seeded: Harness
) -> None:
    c = table_for().c
    form = _form(await _confirm(actions, "retry", state="failing"))
    assert form["count"] == "3"
    with seeded.sync_engine.begin() as conn:  # one of them succeeded meanwhile
        conn.execute(
            update(table_for()).where(c.task_instance == "bounce-4").values(consecutive_failures=0)
        )
    before = _rows(seeded)
    response = await actions.post("/bulk/retry", data=form)
    assert response.status_code == 409
    assert "the filter selected 3 when you confirmed and selects 2 now" in response.text
    assert _rows(seeded) == before


@ONE_DATABASE
async def test_csrf_is_checked_and_a_read_only_app_has_no_bulk_action(
    actions: httpx.AsyncClient, seeded: Harness, client: httpx.AsyncClient
) -> None:
    form = _form(await _confirm(actions, "delete", state="orphaned"))
    before = _rows(seeded)
    for csrf in (None, "forged", TOKEN[:-1] + ("0" if TOKEN[-1] != "0" else "1")):
        data = {k: v for k, v in form.items() if k != "csrf"}
        if csrf is not None:
            data["csrf"] = csrf
        response = await actions.post("/bulk/delete", data=data)
        assert response.status_code == 403, csrf
    assert _rows(seeded) == before
    # read-only: no confirmation, no POST, no link to them
    assert (await client.get("/bulk/delete?state=orphaned")).status_code == 404
    assert (await client.post("/bulk/delete", data=form)).status_code in (404, 405)
    assert "/bulk/" not in (await client.get("/executions?state=failing")).text
    assert _rows(seeded) == before
    # an unknown bulk action, a count of nothing
    assert (await actions.get("/bulk/explode")).status_code == 404
    response = await actions.post("/bulk/delete", data={**form, "count": "0"})
    assert response.status_code == 400
    assert "count must be a positive whole number" in response.text


@ONE_DATABASE
async def test_bulk_pause_and_the_confirmation_escapes_the_filter(
    actions: httpx.AsyncClient, seeded: Harness
) -> None:
    listing = (await actions.get("/executions?task=send-email")).text
    assert 'href="/bulk/pause?state=all&amp;task=send-email"' in listing
    html = await _confirm(actions, "pause", task="send-email")
    assert "6 executions will be held" in html
    response = await actions.post("/bulk/pause", data=_form(html))
    assert response.status_code == 303
    with seeded.sync_engine.connect() as conn:
        paused = conn.execute(select(paused_table(table_for()).c.task_name)).scalars().all()
    assert paused == ["send-email"]
    assert "is paused already" in await _confirm(actions, "pause", task="send-email")
    assert (await actions.get("/bulk/pause?task=nope")).status_code == 404
    assert (await actions.get("/bulk/pause")).status_code == 400

    hostile = await _confirm(actions, "delete", error=XSS, instance=XSS, task=XSS_TASK)
    assert XSS not in hostile
    assert XSS_TASK not in hostile
    assert XSS_ESCAPED in hostile
    assert {"script", "img", "svg"}.isdisjoint(t for t, _ in foreign_tags(hostile))


@ONE_DATABASE
async def test_ten_thousand_rows_in_one_request_and_more_refused(
    actions: httpx.AsyncClient, seeded: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    """10,000 failing executions are retried by one POST (ten statements of 1,000) within
    the request bound; one more and the filter is refused, to be narrowed."""
    with seeded.sync_engine.begin() as conn:
        conn.execute(
            text(
                """
                insert into scheduled_tasks (task_name, task_instance, execution_time,
                    picked, consecutive_failures, last_failure, last_error)
                select 'send-email', 'many-' || lpad(g::text, 5, '0'), :later, false, 1,
                    :now, 'TimeoutError: smtp'
                from generate_series(1, :count) as g
                """
            ),
            {"now": NOW, "later": NOW.replace(year=2031), "count": MAX_BULK},
        )
    html = await _confirm(actions, "retry", state="failing", error="smtp")
    assert "10,000 executions will be rescheduled to now for a retry." in html
    started = time.perf_counter()
    with caplog.at_level(logging.INFO, logger="sqla_scheduler.admin"):
        response = await actions.post("/bulk/retry", data=_form(html))
    took = time.perf_counter() - started
    assert response.status_code == 303, response.text
    print(f"bulk retry of {MAX_BULK:,} executions: {took * 1000:.0f} ms")
    assert took < 30, "within the request bound (it takes a fraction of a second)"
    c = table_for().c
    with seeded.sync_engine.connect() as conn:
        moved = conn.execute(
            select(func.count()).where(
                c.last_error == "TimeoutError: smtp", c.execution_time == NOW
            )
        ).scalar_one()
    assert moved == MAX_BULK

    with seeded.sync_engine.begin() as conn:
        conn.execute(
            text(
                "insert into scheduled_tasks (task_name, task_instance, execution_time, "
                "picked, consecutive_failures, last_error) values "
                "('send-email', 'many-10001', :now, false, 1, 'TimeoutError: smtp')"
            ),
            {"now": NOW},
        )
    refused = await _confirm(actions, "retry", state="failing", error="smtp")
    assert "The filter selects 10,001 executions; one bulk action changes at most 10,000." in (
        refused
    )
    assert '<form method="post" action="/bulk/' not in refused
    stale = {"csrf": TOKEN, "state": "failing", "error": "smtp", "count": str(MAX_BULK)}
    response = await actions.post("/bulk/retry", data=stale)
    assert response.status_code == 409
    assert "selects more than 10,000 rows now" in response.text
    assert (await actions.post("/bulk/retry", data={**stale, "count": "10001"})).status_code == 400
