"""The admin page's kept results over HTTP, on every database through sync and async
engines: the listing newest first, its filters and pages, bounded previews of values and
errors (a page costs the same whatever the values weigh), hostile values and errors
escaped, and the link to it from every page."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import insert
from starlette.applications import Starlette
from starlette.routing import Mount

from sqla_scheduler import ManualClock, Scheduler, SchedulerConfig, _store, custom, one_time
from sqla_scheduler._statements import statements_on
from sqla_scheduler._statements.finding import ResultFilter
from sqla_scheduler.admin import create_app
from sqla_scheduler.models import results_table, table_for
from tests.support import NOW, Harness
from tests.support.admin import (
    HOSTILE_VALUE,
    PASSWORD,
    TASKS,
    USER,
    XSS,
    XSS_ESCAPED,
    assert_inert,
    client_for,
    result_row,
    seed_results,
)

pytestmark = pytest.mark.anyio

#: What ``seed_results`` wrote, newest first: (task, instance, outcome).
NEWEST_FIRST = [
    ("charge", "c-2", "cancelled"),
    ("render-report", XSS, "undecodable"),
    ("render-report", "r-2", "succeeded"),
    ("charge", "c-1", "abandoned"),
    ("render-report", "r-1", "succeeded"),
]


@pytest.fixture
def results(db: Harness) -> Harness:
    seed_results(db.sync_engine)
    return db


async def _json(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await client.get("/api/results", params=params)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def _keys(listing: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(r["task_name"], r["instance_id"], r["outcome"]) for r in listing["results"]]


async def test_results_list_every_kept_result_newest_first(
    results: Harness, client: httpx.AsyncClient
) -> None:
    listing = await _json(client)
    assert _keys(listing) == NEWEST_FIRST
    assert (listing["total"], listing["pages"], listing["page"]) == (5, 1, 1)
    ids = [r["id"] for r in listing["results"]]
    assert ids == sorted(ids, reverse=True)
    r1 = listing["results"][4]
    assert r1 == {
        "id": ids[4],
        "task_name": "render-report",
        "instance_id": "r-1",
        "outcome": "succeeded",
        "succeeded": True,
        "finished_at": (NOW - timedelta(hours=3)).isoformat(),
        "value_preview": '{"url": "/r/1"}',
        "error_line": None,
    }
    abandoned = listing["results"][3]
    assert (abandoned["value_preview"], abandoned["error_line"]) == (
        None,
        "ValueError: card declined",  # the first line alone
    )
    cancelled = listing["results"][0]
    assert (cancelled["succeeded"], cancelled["value_preview"], cancelled["error_line"]) == (
        False, None, None
    )  # fmt: skip

    html = (await client.get("/results")).text
    rows = re.findall(r"<tr>\s*<td><a class=\"task\".*?</tr>", html, re.S)
    assert len(rows) == 5
    assert "5 results · page 1 of 1" in html
    assert '<span class="badge outcome-cancelled">cancelled</span>' in rows[0]
    line = '<code class="error-line" title="ValueError: card declined">'
    assert line + "ValueError: card declined</code>" in rows[3]
    assert "Traceback" not in html
    assert "{&#34;url&#34;: &#34;/r/1&#34;}</code>" in rows[4]
    assert 'aria-current="page">Results</a>' in html
    assert "Kept for 14 d (<code>result_retention</code>)" in html
    assert "No task registered in this scheduler keeps results." in html


async def test_results_filter_by_task_instance_and_outcome_and_page(
    results: Harness, client: httpx.AsyncClient
) -> None:
    async def keys(**params: Any) -> list[tuple[str, str, str]]:
        return _keys(await _json(client, **params))

    assert await keys(task="charge") == [NEWEST_FIRST[0], NEWEST_FIRST[3]]
    assert await keys(outcome="succeeded") == [NEWEST_FIRST[2], NEWEST_FIRST[4]]
    assert await keys(task="render-report", outcome="undecodable") == NEWEST_FIRST[1:2]
    assert await keys(task="render-report", instance="r-2") == NEWEST_FIRST[2:3]
    assert await keys(instance=XSS) == NEWEST_FIRST[1:2]
    assert await keys(instance="r") == []  # an instance id matches exactly
    assert await keys(task="charge", outcome="succeeded") == []

    pages = [await _json(client, per_page=2, page=n) for n in (1, 2, 3, 4)]
    assert [len(p["results"]) for p in pages] == [2, 2, 1, 0]
    assert all((p["total"], p["pages"]) == (5, 3) for p in pages)
    assert [k for p in pages for k in _keys(p)] == NEWEST_FIRST

    html = (await client.get("/results?outcome=succeeded&page=1&per_page=1")).text
    assert "2 results · page 1 of 2" in html
    assert 'rel="next" href="/results?outcome=succeeded&amp;page=2"' in html
    assert '<option value="succeeded" selected>' in html
    assert 'href="/results">Clear filters</a>' in html

    for path, says in [
        ("/results?outcome=failed", "outcome must be one of succeeded, abandoned, undecodable"),
        ("/api/results?outcome=dead", "outcome must be one of succeeded, abandoned"),
        ("/api/results?since=1h", "since must be an ISO 8601 date and time"),
        ("/results?task=" + "t" * 101, "task is longer than 100 characters"),
        ("/api/results?per_page=501", "per_page must be at most 500"),
        ("/results?instance=a%00b", "NUL character"),
    ]:
        response = await client.get(path)
        assert response.status_code == 400, path
        assert says in response.text, path


async def test_listings_read_bounded_previews_of_values_and_errors(
    db: Harness, client: httpx.AsyncClient
) -> None:
    """Values up to ``max_result_size`` (64KB by default) and long tracebacks: a page of 30
    reads 200 characters of each value and 81 of each error, in the database."""
    value = {"blob": "x" * 60_000, "id": 1}
    error = "RuntimeError: " + "e" * 200 + "\n" + "  a traceback line\n" * 2000
    rows = [
        result_row("render-report", f"big-{i}", "succeeded", NOW, value=value) for i in range(15)
    ]
    rows += [result_row("charge", f"bad-{i}", "abandoned", NOW, error=error) for i in range(15)]
    with db.sync_engine.begin() as conn:
        conn.execute(insert(results_table(table_for())), rows)
    response = await client.get("/api/results", params={"per_page": 500})
    assert len(response.content) < 20_000, "a page of 30 results of 60KB each"
    listed = response.json()["results"]
    succeeded = [r for r in listed if r["succeeded"]]
    assert len(succeeded) == 15
    assert all(r["value_preview"] == json.dumps(value)[:199] + "…" for r in succeeded)
    failed = [r for r in listed if not r["succeeded"]]
    assert all(r["error_line"] == "RuntimeError: " + "e" * 65 + "…" for r in failed)
    page = await client.get("/results", params={"per_page": 500})
    assert len(page.content) < 40_000
    # cut in the database: the rows it returns hold the previews' characters alone
    with db.sync_engine.connect() as conn:
        statements = statements_on(conn, table_for())
        read = _store.results.list_results(
            conn, statements, ResultFilter(), limit=30, value_chars=201, error_chars=81
        )
    assert sorted({len(r.value_preview or "") for r in read}) == [0, 201]
    assert sorted({len(r.error_preview or "") for r in read}) == [0, 81]


async def test_hostile_values_errors_and_instance_ids_are_escaped(
    results: Harness, client: httpx.AsyncClient
) -> None:
    for path in (
        "/results",
        f"/results?{httpx.QueryParams({'instance': XSS})}",
        f"/results?{httpx.QueryParams({'task': '<script>alert(10)</script>'})}",
    ):
        html = (await client.get(path)).text
        assert "<script>alert" not in html, path
        assert "<img" not in html, path
    html = (await client.get("/results")).text
    assert XSS_ESCAPED in html  # the instance id
    # the value's preview, as text in the cell and in its title
    assert "&lt;/code&gt;&lt;script&gt;alert(8)&lt;/script&gt;&#34;}</code>" in html
    assert 'title="{&#34;html&#34;: &#34;&lt;img src=x onerror=alert(1)&gt;&#34;' in html
    assert "PayloadError: &lt;/code&gt;&lt;script&gt;alert(9)&lt;/script&gt;</code>" in html
    assert html.count("<code") == html.count("</code>")
    # In JSON the text is data, served as JSON that no browser sniffs into HTML.
    response = await client.get("/api/results", params={"instance": XSS})
    assert response.headers["content-type"] == "application/json"
    assert (
        response.json()["results"][0]["error_line"]
        == "PayloadError: </code><script>alert(9)</script>"
    )
    r2 = await client.get("/api/results", params={"instance": "r-2"})
    assert json.loads(r2.json()["results"][0]["value_preview"]) == HOSTILE_VALUE


@one_time("render-report", keep_result=True)
def render_report(ctx: Any) -> None: ...


@custom("sync-ledger", keep_result=True)
def sync_ledger(ctx: Any) -> None: ...


async def test_results_have_no_script_follow_the_mount_point_and_name_the_tasks(
    results: Harness,
) -> None:
    scheduler = Scheduler(
        results.engine,
        [*TASKS, render_report, sync_ledger],
        SchedulerConfig(result_retention=timedelta(days=2)),
        clock=ManualClock(NOW),
    )
    app = create_app(scheduler, username=USER, password=PASSWORD)
    async with client_for(Starlette(routes=[Mount("/admin/jobs", app=app)])) as client:
        html = (await client.get("/admin/jobs/results", params={"task": "charge"})).text
        overview = (await client.get("/admin/jobs/")).text
    assert_inert(html)
    assert 'href="/admin/jobs/results?task=charge&amp;instance=c-1"' in html
    assert 'href="/admin/jobs/results">Results</a>' in overview  # in every page's header
    # the registered tasks that keep results, suggested by the task filter
    assert "keep results: <code>render-report</code>, <code>sync-ledger</code>." in html
    assert '<option value="render-report">render-report</option>' in html
    assert "Kept for 2 d" in html
