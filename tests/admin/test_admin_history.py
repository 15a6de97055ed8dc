"""The admin page's history over HTTP, on PostgreSQL and SQLite through sync and async
engines: the listing and its filters and pages, the dead letters, one entry in full (its
hostile error and payload escaped), the counts on the overview, and requeue."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from markupsafe import escape
from sqlalchemy import event, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.applications import Starlette
from starlette.routing import Mount

from sqla_scheduler import ManualClock, Scheduler, SchedulerConfig, one_time
from sqla_scheduler.admin import create_app
from sqla_scheduler.admin._security import csrf_token
from sqla_scheduler.models import history_table, table_for
from tests.support import NOW, Harness
from tests.support.admin import (
    ABANDONED_DATA,
    ABANDONED_ERROR,
    BOUNCE_ERROR,
    PASSWORD,
    TASKS,
    USER,
    XSS,
    XSS_ESCAPED,
    AppFactory,
    assert_inert,
    client_for,
    entry_row,
    seed_history,
)

# the admin reads and acts through the same bridge with either engine; its SQL
# (previews, counts, pages) is the same for a database's two drivers
pytestmark = [pytest.mark.anyio, pytest.mark.databases(async_on=["postgresql"])]

SECRET = b"fedcba9876543210fedcba9876543210"
TOKEN = csrf_token(SECRET, USER)

#: What ``seed_history`` wrote, newest first: (task, instance, outcome, attempt).
NEWEST_FIRST = [
    ("nightly-report", "recurring", "dead", 1),
    ("sync-account", "acct-9", "undecodable", 1),
    ("send-email", XSS, "abandoned", 3),
    ("send-email", "bounce-3", "failed", 2),
    ("send-email", "bounce-3", "failed", 1),
    ("send-email", "welcome-1", "succeeded", 1),
    ("legacy-import", "batch-2018", "abandoned", 1),
    ("nightly-report", "recurring", "succeeded", 1),
]


@pytest.fixture
def history(db: Harness) -> Harness:
    seed_history(db.sync_engine)
    return db


async def _json(client: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any]:
    response = await client.get(path, params=params)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def _keys(listing: dict[str, Any]) -> list[tuple[str, str, str, int]]:
    return [
        (e["task_name"], e["instance_id"], e["outcome"], e["attempt"]) for e in listing["entries"]
    ]


def _ids(db: Harness, **where: str) -> list[int]:
    """The ids of the entries whose columns equal ``where``, newest first."""
    h = history_table(table_for())
    query = select(h.c.id).where(*(h.c[name] == value for name, value in where.items()))
    with db.sync_engine.connect() as conn:
        return list(conn.scalars(query.order_by(h.c.id.desc())))


# --- the listing -----------------------------------------------------------------------


async def test_history_lists_every_entry_newest_first(
    history: Harness, client: httpx.AsyncClient
) -> None:
    listing = await _json(client, "/api/history")
    assert _keys(listing) == NEWEST_FIRST
    assert (listing["total"], listing["pages"], listing["page"]) == (8, 1, 1)
    ids = [e["id"] for e in listing["entries"]]
    assert ids == sorted(ids, reverse=True)
    bounce = listing["entries"][3]
    assert bounce["picked_by"] == "worker-2"
    assert bounce["duration_seconds"] == 12.5
    assert bounce["finished_at"] == (NOW - timedelta(minutes=90)).isoformat()
    assert bounce["error_line"] == "OSError: mailbox unavailable"  # the first line alone
    assert bounce["data_preview"] is None  # a failure keeps no payload
    undecodable = listing["entries"][1]
    assert (undecodable["started_at"], undecodable["duration_seconds"]) == (None, None)
    assert undecodable["data_preview"] == '{"account": "nine"}'
    assert undecodable["requeueable"] is True
    # Listings read previews only: neither the errors nor the payloads in full.
    assert all("error" not in e and "data" not in e for e in listing["entries"])

    html = (await client.get("/history")).text
    rows = re.findall(r"<tr>\s*<td><a class=\"entry\".*?</tr>", html, re.S)
    assert len(rows) == 8
    assert "8 entries · page 1 of 1" in html
    assert "12.5 s" in rows[3]
    assert "250 ms" in rows[5]
    line = '<code class="error-line" title="OSError: mailbox unavailable">'
    assert line + "OSError: mailbox unavailable</code>" in rows[3]
    assert "Traceback" not in html
    assert (
        '<code class="error-line" title="ValueError: &lt;/pre&gt;&lt;script&gt;alert(6)' in rows[2]
    )
    assert "<th>Payload</th>" not in html  # only the dead letters' listing has the column
    assert 'history="failures"' in html  # what this scheduler records, and for how long
    assert "14 d" in html


async def test_history_filters_by_task_instance_and_outcome(
    history: Harness, client: httpx.AsyncClient
) -> None:
    async def keys(**params: Any) -> list[tuple[str, str, str, int]]:
        return _keys(await _json(client, "/api/history", **params))

    assert await keys(task="send-email") == NEWEST_FIRST[2:6]
    assert await keys(outcome="failed") == NEWEST_FIRST[3:5]
    assert await keys(outcome="succeeded") == [NEWEST_FIRST[5], NEWEST_FIRST[7]]
    assert await keys(task="nightly-report", outcome="dead") == NEWEST_FIRST[:1]
    assert await keys(task="send-email", instance="bounce-3") == NEWEST_FIRST[3:5]
    assert await keys(instance=XSS) == NEWEST_FIRST[2:3]
    assert await keys(instance="bounce") == []  # an instance id matches exactly
    assert await keys(task="no-such-task") == []
    assert await keys(task="send-email", outcome="dead") == []
    filtered = await _json(client, "/api/history", task="send-email", outcome="failed")
    assert (filtered["task"], filtered["outcome"], filtered["total"]) == (
        "send-email", "failed", 2
    )  # fmt: skip

    html = (await client.get("/history", params={"task": "send-email", "outcome": "failed"})).text
    assert html.count('<a class="entry"') == 2
    assert '<option value="failed" selected>' in html
    assert 'value="send-email"' in html
    assert 'href="/history">Clear filters</a>' in html


async def test_history_pages(history: Harness, client: httpx.AsyncClient) -> None:
    pages = [await _json(client, "/api/history", per_page=3, page=n) for n in (1, 2, 3, 4)]
    assert [len(p["entries"]) for p in pages] == [3, 3, 2, 0]
    assert all((p["total"], p["pages"]) == (8, 3) for p in pages)
    assert [k for p in pages for k in _keys(p)] == NEWEST_FIRST

    html = (await client.get("/history?outcome=succeeded&page=1&per_page=1")).text
    assert "2 entries · page 1 of 2" in html
    assert 'rel="next" href="/history?outcome=succeeded&amp;page=2"' in html
    assert 'rel="prev"' not in html
    html = (await client.get("/history?outcome=succeeded&page=2&per_page=1")).text
    assert 'rel="prev" href="/history?outcome=succeeded&amp;page=1"' in html


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/history?outcome=bogus", "outcome must be one of succeeded, failed, abandoned, dead"),
        ("/api/history?outcome=Failed", "outcome must be one of succeeded, failed, abandoned"),
        (
            "/dead-letters?outcome=failed",
            "for dead letters, outcome must be one of abandoned, undecodable (or",
        ),
        ("/api/dead-letters?outcome=dead", "outcome must be one of abandoned, undecodable"),
        ("/history?page=0", "page must be a positive whole number"),
        ("/api/history?per_page=501", "per_page must be at most 500"),
        ("/history?task=" + "t" * 101, "task is longer than 100 characters"),
        ("/history?instance=a%00b", "NUL character"),
        ("/history/entry", "id is required"),
        ("/history/entry?id=x", "id must be a positive whole number"),
        ("/api/history/entry?id=-3", "id must be a positive whole number"),
    ],
)
async def test_bad_history_parameters_are_a_400_that_says_why(
    history: Harness, client: httpx.AsyncClient, path: str, message: str
) -> None:
    response = await client.get(path)
    assert response.status_code == 400, response.text
    if path.startswith("/api/"):
        assert message in response.json()["error"]
    else:
        assert message in response.text
        assert "<h1>400</h1>" in response.text


# --- dead letters --------------------------------------------------------------------


async def test_dead_letters_are_the_abandoned_and_undecodable_entries(
    history: Harness, client: httpx.AsyncClient
) -> None:
    listing = await _json(client, "/api/dead-letters")
    assert _keys(listing) == [NEWEST_FIRST[1], NEWEST_FIRST[2], NEWEST_FIRST[6]]
    assert listing["outcomes"] == ["abandoned", "undecodable"]
    assert all(e["requeueable"] for e in listing["entries"])
    abandoned = await _json(client, "/api/dead-letters", outcome="abandoned", task="send-email")
    assert _keys(abandoned) == [NEWEST_FIRST[2]]
    assert abandoned["entries"][0]["data_preview"] == json.dumps(ABANDONED_DATA)[:79] + "…"

    html = (await client.get("/dead-letters")).text
    assert "<h1>Dead letters</h1>" in html
    assert "3 entries" in html
    assert "<th>Payload</th>" in html
    assert '<code class="payload">{&#34;account&#34;: &#34;nine&#34;}</code>' in html
    assert "<script>alert" not in html
    assert "<img" not in html
    assert 'aria-current="page">Dead letters</a>' in html
    # Read-only: no requeue anywhere.
    assert "/actions/requeue" not in html
    assert 'data-action="requeue"' not in html


async def test_listings_read_bounded_previews_of_payloads_and_errors(
    db: Harness, client: httpx.AsyncClient
) -> None:
    big = {"blob": "x" * 1_000_000, "id": 1}
    error = "RuntimeError: " + "e" * 200 + "\n" + "  a traceback line\n" * 200
    with db.sync_engine.begin() as conn:
        conn.execute(
            insert(history_table(table_for())),
            [
                entry_row("send-email", f"big-{i}", "abandoned", NOW, data=big, error=error)
                for i in range(30)
            ],
        )
    for path in ("/api/dead-letters", "/api/history"):
        response = await client.get(path, params={"per_page": 500})
        assert len(response.content) < 100_000, "a page of 30 one-megabyte payloads"
        listed = response.json()["entries"]
        assert len(listed) == 30
        assert all(len(e["data_preview"]) == 80 and e["data_preview"][-1] == "…" for e in listed)
        assert all(e["error_line"] == "RuntimeError: " + "e" * 65 + "…" for e in listed)
    for path in ("/dead-letters", "/history"):
        page = await client.get(path, params={"per_page": 500})
        assert len(page.content) < 200_000
    one = (await client.get("/api/history/entry", params={"id": _ids(db)[0]})).json()
    assert one["data"] == big, "one entry's page has its payload in full"
    assert one["error"] == error


# --- one entry -------------------------------------------------------------------------


async def test_an_entry_page_escapes_its_error_and_payload_as_the_execution_page_does(
    history: Harness, client: httpx.AsyncClient
) -> None:
    [abandoned] = _ids(history, outcome="abandoned", task_name="send-email")
    html = (await client.get(f"/history/entry?id={abandoned}")).text
    assert "<script>alert" not in html
    assert "<img" not in html
    assert XSS_ESCAPED in html  # the instance id
    assert f'<pre class="error">{escape(ABANDONED_ERROR)}</pre>' in html
    # The payload as the execution page shows one: indented JSON text, escaped.
    pretty = json.dumps(ABANDONED_DATA, indent=2, sort_keys=True, ensure_ascii=False)
    assert f'<pre class="payload">{escape(pretty)}</pre>' in html
    assert html.count("<pre") == html.count("</pre>") == 2
    assert "no execution with this key" in html
    assert "/actions/requeue" not in html  # read-only

    api = (await client.get("/api/history/entry", params={"id": abandoned})).json()
    assert (api["outcome"], api["attempt"], api["in_table"]) == ("abandoned", 3, False)
    assert api["payload_version"] == 1
    assert api["error"] == ABANDONED_ERROR
    assert api["data"] == ABANDONED_DATA
    assert api["instance_id"] == XSS


async def test_an_entry_of_a_failure_has_its_error_but_no_payload(
    history: Harness, client: httpx.AsyncClient
) -> None:
    newest, _ = _ids(history, task_name="send-email", outcome="failed")
    html = (await client.get(f"/history/entry?id={newest}")).text
    shown = BOUNCE_ERROR.replace('"', "&#34;")
    assert f'<h2>Error</h2>\n<pre class="error">{shown}</pre>' in html
    assert '<pre class="payload">' not in html
    assert "Not kept: only abandoned and undecodable entries keep the payload" in html
    assert "12.5 s" in html
    assert 'href="/history?task=send-email&amp;instance=bounce-3">All entries' in html
    api = (await client.get("/api/history/entry", params={"id": newest})).json()
    assert (api["data"], api["data_preview"], api["requeueable"]) == (None, None, False)

    missing = await client.get("/history/entry?id=999999")
    assert missing.status_code == 404
    assert "There is no history entry 999999" in missing.text
    assert (await client.get("/api/history/entry?id=999999")).status_code == 404


async def test_the_execution_page_links_to_its_history(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    html = (await client.get("/execution?task=send-email&instance=bounce-3")).text
    assert 'href="/history?task=send-email&amp;instance=bounce-3">History of this execution' in html


async def test_history_pages_have_no_script_and_follow_the_mount_point(
    history: Harness, charging: Scheduler
) -> None:
    app = create_app(charging, username=USER, password=PASSWORD, actions=True, secret=SECRET)
    [abandoned] = _ids(history, outcome="abandoned", task_name="send-email")
    paths = ["/history", "/dead-letters", f"/history/entry?id={abandoned}"]
    async with client_for(Starlette(routes=[Mount("/admin/jobs", app=app)])) as client:
        pages = [(await client.get("/admin/jobs" + path)).text for path in paths]
        response = await client.post(
            "/admin/jobs/actions/requeue", data=_form(abandoned, back="/dead-letters")
        )
    for html in pages:
        assert_inert(html)
        assert 'action="/admin/jobs/actions/requeue"' in html
    assert response.status_code == 303
    assert response.headers["location"] == "/admin/jobs/dead-letters?done=requeue"
    assert history.row("send-email", XSS) is not None


# --- the overview's counts --------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "counted"),
    [("failures", ["failed"]), ("all", ["succeeded", "failed"]), ("none", [])],
)
async def test_the_overview_counts_what_the_history_setting_records(
    history: Harness, setting: str, counted: list[str]
) -> None:
    """Each task's outcomes of the last day (the charts' longest span), not of all the
    retention keeps; its dead letters however old."""
    # within history_retention, but a day ago and more: not counted
    older = [
        entry_row("send-email", "old-1", "failed", NOW - timedelta(days=1, seconds=1)),
        entry_row("send-email", "old-2", "succeeded", NOW - timedelta(days=2)),
    ]
    with history.sync_engine.begin() as conn:
        conn.execute(insert(history_table(table_for())), older)
    scheduler = Scheduler(
        history.engine, TASKS, SchedulerConfig(history=setting), clock=ManualClock(NOW)
    )
    async with client_for(create_app(scheduler, username=USER, password=PASSWORD)) as client:
        summary = await _json(client, "/api/summary")
        html = (await client.get("/")).text

    assert summary["history"] == {
        "setting": setting,
        "retention_seconds": 14 * 24 * 3600.0,
        "counted_outcomes": counted,
        "counted_seconds": 24 * 3600.0,
        "dead_letters": 3,  # whatever the setting: the table has them
    }
    tasks = {t["name"]: t for kind in summary["tasks"].values() for t in kind}
    expected = {
        "send-email": {"succeeded": 1, "failed": 2},
        # its success of 20 days ago is past history_retention
        "nightly-report": {"succeeded": 0, "failed": 0},
        "sync-account": {"succeeded": 0, "failed": 0},
        "cleanup": {"succeeded": 0, "failed": 0},
    }
    for name, outcomes in expected.items():
        assert tasks[name]["outcomes"] == {o: outcomes[o] for o in counted}, name
    dead_letters = {name: t["dead_letters"] for name, t in tasks.items()}
    assert dead_letters == {
        "send-email": 1,
        "sync-account": 1,
        "nightly-report": 0,
        "poll-feed": 0,
        "cleanup": 0,
    }  # and the orphaned legacy-import's, in the total alone

    section = re.search(r'<section id="history">.*?</section>', html, re.S)
    assert section is not None
    shown = section.group(0)
    headers = re.findall(r'<th class="num outcome-count"[^>]*>(\w+)', shown)
    assert headers == [o.capitalize() for o in counted]
    if counted:
        row = re.search(r"<tr>\s*<td><a class=\"task\"[^>]*>send-email</a>.*?</tr>", shown, re.S)
        assert row is not None
        since = urlencode({"since": (NOW - timedelta(days=1)).isoformat()})
        for outcome in counted:
            n = expected["send-email"][outcome]
            link = f"/history?task=send-email&amp;outcome={outcome}&amp;{since}"
            assert f'<a href="{link}">{n}</a>' in row.group(0)
        assert '<a href="/dead-letters?task=send-email">1</a>' in row.group(0)
        assert shown.count("<tr>") == 1 + len(TASKS)  # the header, and each registered task
    else:
        assert "<table" not in shown  # nothing to count
    assert 'href="/dead-letters">Dead letters <span class="count bad">3</span>' in shown
    assert f'history="{setting}"' in shown


async def test_the_counts_read_the_last_day_and_the_dead_letters_alone(
    history: Harness, client: httpx.AsyncClient
) -> None:
    """Two grouped statements on the history: the outcomes since a day ago (through the
    index on ``finished_at``), and the dead letters with their outcomes written in the SQL,
    as the partial index ``ix_scheduled_tasks_history_dead_letters`` has them."""
    statements: list[str] = []
    engine = history.engine
    if isinstance(engine, AsyncEngine):
        engine = engine.sync_engine

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        await _json(client, "/api/summary")
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    on_history = [s for s in statements if "scheduled_tasks_history" in s]
    assert len(on_history) == 2, on_history
    recent, dead = on_history
    for statement in on_history:
        assert "GROUP BY scheduled_tasks_history.task_name" in statement
    assert "scheduled_tasks_history.finished_at >= " in recent
    assert "scheduled_tasks_history.outcome IN ('abandoned', 'undecodable')" in dead


# --- requeue ---------------------------------------------------------------------------


class Declined(Exception):
    """The failing task's error."""


@one_time("charge", max_retries=0)
def charge(ctx: Any) -> None:
    raise Declined(f"card declined for {ctx.payload['card']}")


@pytest.fixture
def charging(db: Harness) -> Scheduler:
    """A scheduler of ``charge`` alone, which fails for good at once."""
    return Scheduler(db.engine, [charge], SchedulerConfig(), clock=ManualClock(NOW))


@pytest.fixture
async def actions(charging: Scheduler) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(charging, username=USER, password=PASSWORD, actions=True, secret=SECRET)
    async with client_for(app) as client:
        yield client


async def _abandon(db: Harness, scheduler: Scheduler, instance: str, payload: Any) -> int:
    """Schedule ``charge`` with ``payload``, run it (it is abandoned at once) and return
    its history entry's id."""
    await db.resolve(scheduler.schedule(db.engine, charge.instance(instance, payload)))
    assert await scheduler.run_due() == 1
    assert db.row("charge", instance) is None
    [entry_id] = _ids(db, task_name="charge", task_instance=instance)
    return entry_id


def _form(entry_id: int | str, **extra: str) -> dict[str, str]:
    return {"csrf": TOKEN, "id": str(entry_id), "back": "/dead-letters?task=charge", **extra}


async def test_requeue_through_the_page_puts_the_execution_back(
    db: Harness,
    charging: Scheduler,
    actions: httpx.AsyncClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    payload = {"card": "4242", "amount": 12.5}
    entry_id = await _abandon(db, charging, "c1", payload)
    page = (await actions.get("/dead-letters")).text
    form = re.search(r'<form method="post" action="/actions/requeue".*?</form>', page, re.S)
    assert form is not None
    assert f'name="id" value="{entry_id}"' in form.group(0)
    assert f'name="csrf" value="{TOKEN}"' in form.group(0)

    with caplog.at_level(logging.INFO, logger="sqla_scheduler.admin"):
        response = await actions.post("/actions/requeue", data=_form(entry_id))
    assert response.status_code == 303
    assert response.headers["location"] == "/dead-letters?task=charge&done=requeue"
    row = db.row("charge", "c1")
    assert row is not None
    assert (row["task_data"], row["execution_time"], row["consecutive_failures"]) == (
        payload,
        NOW,
        0,
    )
    [record] = [r for r in caplog.records if r.name == "sqla_scheduler.admin"]
    assert "requeue by 'ops' of history entry" in record.getMessage()
    assert record.__dict__["history_id"] == entry_id
    assert (record.__dict__["task_name"], record.__dict__["done"]) == ("charge", True)

    shown = (await actions.get(response.headers["location"])).text
    assert "Done: the execution was requeued: scheduled again, due now." in shown
    execution = (await actions.get("/execution?task=charge&instance=c1")).text
    assert "4242" in execution
    entry_page = (await actions.get(f"/history/entry?id={entry_id}")).text
    assert "an execution with this key</a>" in entry_page
    assert "requeue would do nothing" in entry_page
    assert "/actions/requeue" not in entry_page

    # Twice is refused: the execution is back in the table.
    again = await actions.post("/actions/requeue", data=_form(entry_id))
    assert again.status_code == 409
    assert "Nothing was done: an execution of charge / c1 is in the table already" in again.text

    # It runs again with its payload (and fails for good again: a second entry).
    assert await charging.run_due() == 1
    assert db.row("charge", "c1") is None
    assert len(_ids(db, task_name="charge", outcome="abandoned")) == 2


async def test_requeue_refuses_what_is_not_a_dead_letter(
    history: Harness, actions: httpx.AsyncClient
) -> None:
    first, _ = _ids(history, task_name="send-email", outcome="failed")
    response = await actions.post("/actions/requeue", data=_form(first))
    assert response.status_code == 409
    assert f"entry {first} is failed; only abandoned and undecodable entries" in response.text
    assert history.row("send-email", "bounce-3") is None
    missing = await actions.post("/actions/requeue", data=_form(10**9))
    assert missing.status_code == 404
    assert "there is no history entry 1000000000" in missing.text
    for bad in ("", "x", "0", "-1"):
        assert (await actions.post("/actions/requeue", data=_form(bad))).status_code == 400


@pytest.mark.parametrize(
    "token", [None, "", TOKEN[:-1], csrf_token(SECRET, "someone-else"), csrf_token(b"x" * 32, USER)]
)
async def test_requeue_needs_the_csrf_token(
    history: Harness, actions: httpx.AsyncClient, token: str | None
) -> None:
    [abandoned] = _ids(history, outcome="abandoned", task_name="send-email")
    data = _form(abandoned)
    if token is None:
        del data["csrf"]
    else:
        data["csrf"] = token
    response = await actions.post("/actions/requeue", data=data)
    assert response.status_code == 403
    assert history.row("send-email", XSS) is None


async def test_requeue_is_absent_from_a_read_only_page(
    history: Harness, make_app: AppFactory
) -> None:
    [abandoned] = _ids(history, outcome="abandoned", task_name="send-email")
    async with client_for(make_app()) as client:
        for path in ("/dead-letters", "/history", f"/history/entry?id={abandoned}"):
            html = (await client.get(path)).text
            assert '<form method="post"' not in html, path
            assert 'data-action="requeue"' not in html, path
        response = await client.post("/actions/requeue", data=_form(abandoned))
    assert response.status_code == 405
    assert history.row("send-email", XSS) is None
