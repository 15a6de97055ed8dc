"""Finding things in the admin's lists: the task chosen from the known names, instance id
and error text by substring, outcome, time range, sortable columns, pagination that keeps
the filter, the error's first line in every list; escaping and 400s for each new field."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from html import unescape
from typing import Any

import httpx
import pytest
from sqlalchemy import insert

from sqla_scheduler.models import table_for
from tests.support import NOW, Harness
from tests.support.admin import (
    EVERY_DATABASE,
    ONE_DATABASE,
    XSS,
    XSS_ESCAPED,
    XSS_TASK,
    answered,
    foreign_tags,
    row,
    seed_history,
    seed_many,
    seed_results,
)

pytestmark = pytest.mark.anyio


async def _json(client: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any]:
    response = await client.get(path, params=params)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def _instances(found: dict[str, Any], key: str = "executions") -> list[str]:
    return [e["instance_id"] for e in found[key]]


@EVERY_DATABASE
async def test_filters_and_sorts_on_every_database(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    seed_history(seeded.sync_engine)
    seed_results(seeded.sync_engine)
    get = _json

    # the last error by substring, case-insensitively, LIKE's wildcards literally
    assert _instances(await get(client, "/api/executions", error="mailbox")) == ["bounce-3"]
    assert _instances(await get(client, "/api/executions", error="MAILBOX UNAV")) == ["bounce-3"]
    assert (await get(client, "/api/executions", error="%"))["total"] == 0
    assert (await get(client, "/api/executions", error="Error", state="failing"))["total"] == 2
    # the execution time in [since, until)
    window = {"since": NOW.isoformat(), "until": (NOW + timedelta(minutes=10)).isoformat()}
    assert _instances(await get(client, "/api/executions", **window)) == [XSS]
    window["until"] = (NOW + timedelta(minutes=15)).isoformat()
    assert sorted(_instances(await get(client, "/api/executions", **window))) == sorted(
        [XSS, "bounce-3", "welcome-1"]
    )
    # a time without an offset is UTC, as a datetime-local input sends it
    naive = await get(client, "/api/executions", since="2030-05-17T12:00", until="2030-05-17T12:15")
    assert naive["total"] == 3
    assert (naive["since"], naive["until"]) == (NOW.isoformat(), window["until"])

    # sorted by a whitelisted column, each way; NULLs last either way
    failing = await get(client, "/api/executions", state="failing", sort="failures")
    assert _instances(failing) == ["bounce-3", XSS, "bounce-4"]  # most failures first
    assert failing["dir"] == "desc"
    ascending = await get(client, "/api/executions", state="failing", sort="failures", dir="asc")
    assert _instances(ascending) == ["bounce-4", XSS, "bounce-3"]
    latest = await get(client, "/api/executions", sort="last_failure", dir="desc")
    assert _instances(latest)[:4] == [XSS, "bounce-3", "bounce-4", "recurring"]
    assert all(e["last_failure"] is None for e in latest["executions"][4:])
    earliest = await get(client, "/api/executions", sort="last_failure", dir="asc")
    assert _instances(earliest)[:4] == ["recurring", "bounce-4", "bounce-3", XSS]
    assert all(e["last_failure"] is None for e in earliest["executions"][4:])
    due = await get(client, "/api/executions", sort="due", per_page=3, page=2)
    assert _instances(due) == ["recurring", "welcome-2", XSS]  # pages of one order

    # history: error text, instance substring, finish time, order
    history = await get(client, "/api/history", error="MAILBOX")
    assert (history["total"], _instances(history, "entries")) == (2, ["bounce-3", "bounce-3"])
    assert (await get(client, "/api/history", instance_contains="ounce"))["total"] == 2
    recent = await get(client, "/api/history", since=(NOW - timedelta(minutes=100)).isoformat())
    assert recent["total"] == 4
    by_attempt = await get(client, "/api/history", sort="attempt")
    assert [e["attempt"] for e in by_attempt["entries"]][:2] == [3, 2]
    letters = await get(client, "/api/dead-letters", error="no such", sort="finished", dir="asc")
    assert _instances(letters, "entries") == ["batch-2018"]

    # results: error text, instance substring, finish time, order
    results = await get(client, "/api/results", error="DECLINED")
    assert _instances(results, "results") == ["c-1"]
    oldest = await get(client, "/api/results", sort="finished", dir="asc")
    assert _instances(oldest, "results")[:2] == ["r-1", "c-1"]
    assert (await get(client, "/api/results", instance_contains="r-"))["total"] == 2
    until = (NOW - timedelta(minutes=90)).isoformat()
    assert _instances(await get(client, "/api/results", until=until), "results") == ["c-1", "r-1"]


@ONE_DATABASE
async def test_every_list_shows_the_error_first_line_read_as_a_bounded_preview(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    long = "RuntimeError: " + "x" * 5000 + "\nsecond line"
    with seeded.sync_engine.begin() as conn:
        conn.execute(
            insert(table_for()),
            [row("send-email", "long-1", NOW, consecutive_failures=1, last_error=long)],
        )
    for path in ("/executions?state=failing", "/"):  # the list, and the overview's section
        html = (await client.get(path)).text
        # the line in its title too: the start shows in the column, the rest on hover
        line = '<code class="error-line" title="OSError: mailbox unavailable">'
        assert line + "OSError: mailbox unavailable</code>" in html, path
        assert "Traceback" not in html, path  # the first line alone
        hostile = "ValueError: &lt;/pre&gt;&lt;script&gt;alert(5)&lt;/script&gt;"
        assert f'title="{hostile}">{hostile}</code>' in html, path  # escaped in both
    listing = await _json(client, "/api/executions", state="failing")
    lines = {e["instance_id"]: e["error_line"] for e in listing["executions"]}
    assert lines["bounce-3"] == "OSError: mailbox unavailable"
    assert lines["bounce-4"] is None
    assert lines["long-1"] == ("RuntimeError: " + "x" * 80)[:79] + "…"  # cut, as previews are
    assert all("last_error" not in e for e in listing["executions"]), "a listing reads previews"
    one = await _json(client, "/api/execution", task="send-email", instance="long-1")
    assert one["last_error"] == long  # one execution's page has it in full
    seed_history(seeded.sync_engine)
    for path in ("/history", "/dead-letters"):
        page = (await client.get(path)).text
        assert '<code class="error-line" title="' in page, path


@ONE_DATABASE
async def test_the_task_is_chosen_from_the_known_names_and_an_unknown_one_still_filters(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    html = (await client.get("/executions")).text
    select = re.search(r'<select name="task">(.*?)</select>', html, re.S)
    assert select is not None
    options = [unescape(o) for o in re.findall(r'<option value="([^"]*)"', select.group(1))]
    # any task, the registered ones and those seen in the table (an orphan's), sorted
    assert options[0] == ""
    assert {"cleanup", "send-email", "legacy-import", XSS_TASK} <= set(options[1:])
    assert options[1:] == sorted(options[1:])
    # an old link with a name nobody knows: filtered exactly, kept in the select
    unknown = (await client.get("/executions?task=send")).text
    assert '<option value="send" selected>send</option>' in unknown
    assert "No execution matches this filter." in unknown
    chosen = (await client.get("/executions?task=send-email")).text
    assert '<option value="send-email" selected>send-email</option>' in chosen
    seed_history(seeded.sync_engine)
    history = (await client.get("/history")).text
    assert '<option value="legacy-import">legacy-import</option>' in history


@ONE_DATABASE
async def test_sortable_headers_link_each_way_and_pages_keep_the_filter(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    html = (await client.get("/executions?state=failing&error=Error&per_page=1")).text
    # each header links to its sort, first way; the page goes back to the first
    assert '<a class="sort" href="/executions?state=failing&amp;error=Error&amp;sort=due' in html
    assert "aria-sort" not in html  # the default order: no column is marked
    sorted_page = await client.get(
        "/executions",
        params={"state": "failing", "error": "Error", "per_page": 1, "sort": "due"},
    )
    text = sorted_page.text
    assert (
        '<th aria-sort="ascending"><a class="sort" href="/executions?state=failing&amp;'
        'error=Error&amp;sort=due&amp;dir=desc" data-sort="due">Execution time'
    ) in text
    assert text.count("aria-sort") == 1
    # the pager carries the filter and the order
    assert (
        'rel="next" href="/executions?state=failing&amp;error=Error&amp;sort=due&amp;dir=asc'
        "&amp;page=2"
    ) in text
    # the filter form carries the order, and the time range in a datetime-local's form
    since = (await client.get("/executions?since=2030-05-17T11:30:00%2B00:00&sort=task")).text
    assert 'name="since" type="datetime-local" step="1" value="2030-05-17T11:30:00"' in since
    assert '<input type="hidden" name="sort" value="task">' in since


@ONE_DATABASE
async def test_every_new_field_is_escaped(seeded: Harness, client: httpx.AsyncClient) -> None:
    seed_history(seeded.sync_engine)
    seed_results(seeded.sync_engine)
    hostile = {"error": XSS, "instance_contains": XSS, "task": XSS}
    pages = [
        ("/executions", {"error": XSS, "instance": XSS, "task": XSS_TASK}),
        ("/executions", {"state": "orphaned"}),  # the hostile task name among the seen ones
        ("/history", hostile),
        ("/dead-letters", hostile),
        ("/results", hostile),
    ]
    for path, params in pages:
        response = await client.get(path, params=params)
        assert response.status_code == 200, (path, response.text)
        html = response.text
        assert XSS not in html, path
        assert XSS_TASK not in html, path
        tags = foreign_tags(html)
        assert {"script", "img", "svg"}.isdisjoint(t for t, _ in tags), path
        attributes = {name for _, attrs in tags for name, _ in attrs}
        assert not any(name.startswith("on") for name in attributes), path
    html = (await client.get("/executions", params={"error": XSS})).text
    assert f'name="error" value="{XSS_ESCAPED}"' in html
    assert f"error containing <code>{XSS_ESCAPED}</code>" in html


@ONE_DATABASE
async def test_bad_parameters_are_a_400_naming_them(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    cases = [
        ("since=yesterday", "since must be an ISO 8601 date and time"),
        ("until=2030-13-01T00:00", "until must be an ISO 8601 date and time"),
        ("since=2030-05-17T12:00&until=2030-05-17T11:00", "must be after since"),
        ("sort=payload", "sort must be one of due, task, instance, priority, failures"),
        ("sort=task&dir=up", "dir must be asc or desc, got 'up'"),
        ("error=" + "e" * 201, "error is longer than 200 characters"),
        ("error=a%00b", "NUL character"),
        ("since=" + "9" * 5000, "since must be an ISO 8601 date and time"),
    ]
    for query, says in cases:
        for path in ("/executions", "/api/executions", "/history", "/api/results"):
            if path == "/api/results" and query.startswith("sort=payload"):
                says_here = "sort must be one of finished, task, instance, outcome"
            elif path == "/history" and query.startswith("sort=payload"):
                says_here = "sort must be one of finished, task, instance, outcome, attempt"
            else:
                says_here = says
            response = await client.get(f"{path}?{query}")
            assert response.status_code == 400, (path, query)
            assert says_here in response.text.replace("&#39;", "'"), (path, query)
    response = await client.get("/api/history?instance_contains=" + "i" * 256)
    assert "instance_contains is longer than 255 characters" in response.text


@pytest.mark.postgres_only("seeds with generate_series; large tables are PostgreSQL's case")
@ONE_DATABASE
async def test_finding_works_with_100_000_rows(db: Harness, client: httpx.AsyncClient) -> None:
    """The known names, every sort key and the error filter answer correctly over 100,000
    rows; the time each takes is printed (run with -s), not asserted."""
    seed_many(db.sync_engine, 100_000)
    checks = {
        "/api/executions?page=1000": 100_000,  # the default order, to compare with
        "/api/executions?sort=due&dir=desc&page=1000": 100_000,
        "/api/executions?sort=task&page=1999": 100_000,
        "/api/executions?sort=instance&dir=desc": 100_000,
        "/api/executions?sort=failures&state=failing&page=200": 14_285,
        "/api/executions?sort=last_failure": 100_000,
        "/api/executions?sort=priority&task=sync-account": 50_000,
        "/api/executions?error=none%20here": 0,
        "/api/executions?since=2030-05-17T12:00:01&until=2030-05-17T12:01:41": 100,
        "/executions": None,
    }
    for path, total in checks.items():
        started = time.perf_counter()
        response = await answered(client, path)
        took = time.perf_counter() - started
        print(f"{path}: {took * 1000:.0f} ms")
        if total is not None:
            assert response.json()["total"] == total, path
        else:
            assert '<option value="sync-account">sync-account</option>' in response.text
