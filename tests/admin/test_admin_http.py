"""The admin app over HTTP, in process, on real PostgreSQL through sync and async engines:
authentication, headers, escaping, sections, JSON, filters and pagination."""

from __future__ import annotations

import base64
import re
import sys
from typing import Any

import httpx
import pytest
from sqlalchemy import create_engine, insert
from sqlalchemy import text as sql
from starlette.applications import Starlette
from starlette.routing import Mount

from sqla_scheduler import Scheduler, _store
from sqla_scheduler._statements import statements_on
from sqla_scheduler.admin import create_app, credentials_from_env, serve
from sqla_scheduler.admin._security import CONTENT_SECURITY_POLICY
from sqla_scheduler.exceptions import ConfigurationError
from sqla_scheduler.models import table_for
from tests.support import NOW, Harness
from tests.support.admin import (
    BOUNCE_ERROR,
    PASSWORD,
    USER,
    XSS,
    XSS_ESCAPED,
    XSS_TASK,
    AppFactory,
    answered,
    client_for,
    make_scheduler,
    row,
    seed_many,
    start_tags,
)

# the admin reads and acts through the same bridge with either engine; its SQL
# (previews, counts, pages) is the same for a database's two drivers
pytestmark = [pytest.mark.anyio, pytest.mark.databases(async_on=["postgresql"])]

PAGES = [
    "/",
    "/executions",
    "/executions?state=failing",
    "/history",
    "/dead-letters",
    "/api/summary",
    "/api/history",
    "/results",
    "/api/results",
    "/groups",
    "/api/groups",
    "/static/admin.css",
]


def _section(html: str, name: str) -> str:
    """The HTML of ``<section id=name>``."""
    match = re.search(rf'<section id="{name}".*?</section>', html, re.S)
    assert match, f"no section {name!r}"
    return match.group(0)


# --- building the app -----------------------------------------------------------------


@pytest.fixture
def offline() -> Scheduler:
    """A scheduler whose engine never connects (building the app reads nothing)."""
    return make_scheduler(create_engine("postgresql+psycopg://"))


@pytest.mark.parametrize("password", [None, ""])
def test_create_app_refuses_to_build_without_a_password(
    offline: Scheduler, password: str | None
) -> None:
    with pytest.raises(ConfigurationError, match="ADMIN_PASSWORD"):
        create_app(offline, password=password)
    with pytest.raises(ConfigurationError, match="ADMIN_PASSWORD"):
        create_app(offline)


def test_create_app_checks_its_arguments(offline: Scheduler) -> None:
    with pytest.raises(ConfigurationError, match="username"):
        create_app(offline, username="a:b", password="x")
    with pytest.raises(ConfigurationError, match="page_size"):
        create_app(offline, password="x", page_size=0)
    with pytest.raises(TypeError, match="Scheduler"):
        create_app(object(), password="x")  # type: ignore[arg-type]


def test_serve_runs_uvicorn_on_the_given_address(
    offline: Scheduler, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uvicorn

    calls: list[tuple[Any, dict[str, Any]]] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: calls.append((app, kw)))
    serve(offline, host="127.0.0.2", port=9999, username="ops", password="pw")
    [(app, options)] = calls
    assert callable(app)
    assert (options["host"], options["port"]) == ("127.0.0.2", 9999)
    with pytest.raises(ConfigurationError, match="ADMIN_PASSWORD"):
        serve(offline, password="")


def test_credentials_from_env() -> None:
    assert credentials_from_env({"ADMIN_PASSWORD": "s3cret"}) == ("admin", "s3cret")
    assert credentials_from_env({"ADMIN_USER": "ops", "ADMIN_PASSWORD": "pw"}) == ("ops", "pw")
    for environ in ({}, {"ADMIN_PASSWORD": ""}, {"ADMIN_USER": "ops"}):
        with pytest.raises(ConfigurationError, match="ADMIN_PASSWORD"):
            credentials_from_env(environ)


def test_importing_without_the_extra_says_which_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [m for m in sys.modules if m.startswith("sqla_scheduler.admin")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "starlette", None)
    with pytest.raises(ImportError, match=re.escape("pip install sqla-scheduler[admin]")):
        import sqla_scheduler.admin  # noqa: F401


# --- authentication, methods, headers --------------------------------------------------


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Basic " + base64.b64encode(f"{USER}:wrong".encode()).decode(),
        "Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode(),
        "Basic " + base64.b64encode(f"{USER}:{PASSWORD}x".encode()).decode(),
        "Basic " + base64.b64encode(USER.encode()).decode(),
        "Basic not-base64!",
        "Bearer " + PASSWORD,
    ],
)
async def test_every_page_needs_the_credentials(
    make_app: AppFactory, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    async with client_for(make_app(), auth=None) as client:
        for path in PAGES:
            response = await client.get(path, headers=headers)
            assert response.status_code == 401, path
            assert response.headers["WWW-Authenticate"].startswith("Basic realm=")
            assert "scheduled_tasks" not in response.text


async def test_read_only_by_default(seeded: Harness, client: httpx.AsyncClient) -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        for path in ("/", "/executions", "/actions/delete", "/actions/run-now"):
            response = await client.request(method, path, data={"task": "x"})
            assert response.status_code == 405, (method, path)
            assert response.headers["Allow"] == "GET, HEAD"
    assert (await client.head("/")).status_code == 200
    for path in ("/", "/executions", "/execution?task=send-email&instance=welcome-1"):
        html = (await client.get(path)).text
        assert '<form method="post"' not in html
        assert "/actions/" not in html
        assert "read-only" in html


async def test_security_headers_on_every_response(make_app: AppFactory) -> None:
    async with client_for(make_app()) as client, client_for(make_app(), auth=None) as anonymous:
        responses = [
            await client.get("/"),
            await client.get("/api/summary"),
            await client.get("/static/admin.css"),
            await client.get("/static/admin.js"),
            await client.get("/no-such-page"),
            await client.get("/executions?state=bogus"),
            await client.post("/"),
            await anonymous.get("/"),
        ]
    for response in responses:
        headers = response.headers
        assert headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, response.url
        assert "unsafe-inline" not in headers["Content-Security-Policy"]
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert headers["X-Content-Type-Options"] == "nosniff"
        assert headers["Referrer-Policy"] == "no-referrer"
        assert headers["Cache-Control"] == "no-store"
        assert headers["X-Frame-Options"] == "DENY"
    assert [r.status_code for r in responses] == [200, 200, 200, 200, 404, 400, 405, 401]
    assert responses[2].headers["content-type"].startswith("text/css")
    assert responses[3].headers["content-type"].startswith("text/javascript")
    assert "script-src 'self';" in CONTENT_SECURITY_POLICY


async def test_a_database_error_is_a_plain_500_with_the_headers() -> None:
    unreachable = make_scheduler(create_engine("postgresql+psycopg://u@127.0.0.1:1/none"))
    app = create_app(unreachable, username=USER, password=PASSWORD)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://admin.test", auth=(USER, PASSWORD)
    ) as client:
        response = await client.get("/")
    assert response.status_code == 500
    assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    assert response.headers["Cache-Control"] == "no-store"
    assert "127.0.0.1" not in response.text  # no traceback, no connection details


async def test_pages_have_no_inline_script_or_style(seeded: Harness, make_app: AppFactory) -> None:
    async with client_for(make_app(actions=True)) as client:
        for path in (
            "/",
            "/executions",
            "/execution?task=send-email&instance=welcome-1",
            "/results",
        ):
            html = (await client.get(path)).text
            tags = start_tags(html)
            # inline <svg> is the overview's charts: drawn with classes, no script or style
            assert {"style", "img", "iframe"}.isdisjoint(t for t, _ in tags)
            # One script, the app's own file, empty inline (the policy allows only 'self').
            scripts = [dict(attrs) for t, attrs in tags if t == "script"]
            assert scripts == [{"src": "/static/admin.js", "defer": None}], scripts
            assert html.count("<script") == 1
            assert '<script src="/static/admin.js" defer></script>' in html
            attributes = {name for _, attrs in tags for name, _ in attrs}
            assert "style" not in attributes
            assert not any(name.startswith("on") for name in attributes), attributes


# --- escaping ------------------------------------------------------------------------


async def test_hostile_payload_instance_and_task_name_are_escaped(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    detail = httpx.QueryParams({"task": "send-email", "instance": XSS})
    for path in (
        "/",
        "/executions",
        "/executions?state=failing",
        "/executions?state=orphaned",
        f"/execution?{detail}",
        f"/executions?{httpx.QueryParams({'instance': XSS})}",
    ):
        html = (await client.get(path)).text
        assert "<img" not in html, path
        assert "<svg onload" not in html, path
        assert "<script>alert" not in html, path
    html = (await client.get(f"/execution?{detail}")).text
    assert XSS_ESCAPED in html  # the instance id, and the payload in the <pre>
    assert "&lt;/pre&gt;&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "ValueError: &lt;/pre&gt;&lt;script&gt;alert(5)&lt;/script&gt;" in html  # last error
    assert html.count("<pre") == html.count("</pre>") == 2
    orphans = (await client.get("/executions?state=orphaned")).text
    assert "&lt;svg onload=alert(3)&gt;" in orphans
    # In JSON the text is data, served as JSON that no browser sniffs into HTML.
    response = await client.get(f"/api/execution?{detail}")
    assert response.headers["content-type"] == "application/json"
    assert response.json()["instance_id"] == XSS
    assert response.json()["data"]["html"] == XSS
    assert response.json()["payload_version"] == 1


async def test_hostile_search_text_is_escaped(seeded: Harness, client: httpx.AsyncClient) -> None:
    params = httpx.QueryParams({"task": '"><script>alert(4)</script>', "instance": XSS})
    html = (await client.get(f"/executions?{params}")).text
    assert "<script>alert" not in html
    assert "<img" not in html
    assert 'value="&#34;&gt;&lt;script&gt;alert(4)&lt;/script&gt;"' in html


@pytest.mark.parametrize(
    "path",
    [
        "/executions?task=a%00b",
        "/executions?instance=%00",
        "/execution?task=send-email&instance=x%00",
        "/api/executions?task=%00",
        "/api/execution?task=%00&instance=i",
        "/?refresh=%00",
    ],
)
async def test_a_nul_in_a_query_is_a_400(
    seeded: Harness, client: httpx.AsyncClient, path: str
) -> None:
    response = await client.get(path)
    assert response.status_code == 400, response.text
    assert "NUL character" in response.text


# --- sections --------------------------------------------------------------------------


async def test_overview_shows_each_section(seeded: Harness, client: httpx.AsyncClient) -> None:
    html = (await client.get("/")).text
    counts = _section(html, "counts")
    for state, n in {"all": 11, "scheduled": 8, "due": 2, "running": 3, "failing": 3}.items():
        assert f'<span class="n">{n}</span><span class="label">{state}</span>' in counts
    assert '<span class="n">2</span><span class="label">orphaned</span>' in counts

    tasks = _section(html, "tasks")
    assert tasks.index("Recurring") < tasks.index("cleanup") < tasks.index("One-time")
    assert tasks.index("One-time") < tasks.index("send-email") < tasks.index("Custom")
    assert tasks.index("Custom") < tasks.index("sync-account")

    recurring = _section(html, "recurring")
    assert "At 02:00" in recurring
    assert "CRON|0 0 2 * * ?" in recurring
    assert "Every 5m" in recurring
    assert "FIXED_RATE|5m" in recurring
    assert "Daily at 03:30 (Europe/Berlin)" in recurring
    assert "No row yet" in recurring
    assert "2030-05-18 02:00:00 UTC" in recurring  # next run
    assert "2030-05-17 02:00:04 UTC" in recurring  # last success
    assert "2030-05-17 09:00:00 UTC" in recurring  # last failure
    assert "worker-2" in recurring  # owner

    running = _section(html, "running")
    rows = re.findall(r"<tr class=\"health-row-(\w+)\">.*?instance=([\w-]+)", running, re.S)
    assert sorted(rows) == [("dead", "invoice-7"), ("late", "welcome-2"), ("ok", "recurring")]
    assert "45 min ago" in running
    assert "12 min ago" in running
    assert "20 s ago" in running
    for picker in ("worker-1", "worker-2", "worker-3"):
        assert picker in running

    failing = _section(html, "failing")
    # Most recent failure first, with the failures in a row.
    order = [failing.index(XSS_ESCAPED), failing.index("bounce-3"), failing.index("bounce-4")]
    assert order == sorted(order)
    assert re.findall(r'<td class="num bad">(\d+)</td>', failing) == ["2", "3", "1"]

    orphaned = _section(html, "orphaned")
    assert "legacy-import" in orphaned
    assert "batch-2019" in orphaned
    assert "&lt;svg onload=alert(3)&gt;" in orphaned
    assert "send-email" not in orphaned


async def test_execution_page_shows_the_payload_as_pretty_json(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    html = (await client.get("/execution?task=send-email&instance=welcome-1")).text
    assert '<pre class="payload">{\n  &#34;to&#34;: &#34;ada@example.com&#34;\n}</pre>' in html
    missing = await client.get("/execution?task=send-email&instance=nope")
    assert missing.status_code == 404
    assert (await client.get("/execution?task=send-email")).status_code == 400


async def test_execution_page_shows_the_last_error(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    html = (await client.get("/execution?task=send-email&instance=bounce-3")).text
    shown = BOUNCE_ERROR.replace('"', "&#34;")
    assert f'<h2>Last error</h2>\n<pre class="error">{shown}</pre>' in html
    api = (await client.get("/api/execution?task=send-email&instance=bounce-3")).json()
    assert api["last_error"] == BOUNCE_ERROR
    healthy = (await client.get("/execution?task=send-email&instance=welcome-1")).text
    assert "Last error" not in healthy
    assert '<pre class="error">' not in healthy
    api = (await client.get("/api/execution?task=send-email&instance=welcome-1")).json()
    assert api["last_error"] is None


async def test_links_follow_the_mount_point(seeded: Harness, make_app: AppFactory) -> None:
    outer = Starlette(routes=[Mount("/admin/jobs", app=make_app())])
    async with client_for(outer) as client:
        html = (await client.get("/admin/jobs/")).text
        assert (await client.get("/admin/jobs/static/admin.css")).status_code == 200
        html += (await client.get("/admin/jobs/executions?state=running")).text
        html += (await client.get("/admin/jobs/no-such-page")).text
    links = re.findall(r'(?:href|action)="([^"]+)"', html)
    assert links
    assert [link for link in links if not link.startswith("/admin/jobs/")] == []
    assert "/admin/jobs/static/admin.css" in links
    assert "/admin/jobs/execution?task=send-email&amp;instance=invoice-7" in links


async def test_auto_refresh_is_a_meta_tag_and_follows_links(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    html = (await client.get("/executions?state=failing&refresh=5")).text
    assert '<meta http-equiv="refresh" content="5">' in html
    assert 'href="/execution?task=send-email&amp;instance=bounce-3&amp;refresh=5"' in html
    assert 'http-equiv="refresh"' not in (await client.get("/")).text
    assert '<meta http-equiv="refresh" content="2">' in (await client.get("/?refresh=0")).text


# --- JSON ------------------------------------------------------------------------------


async def test_api_summary_mirrors_the_overview(seeded: Harness, client: httpx.AsyncClient) -> None:
    response = await client.get("/api/summary")
    assert response.headers["content-type"] == "application/json"
    summary = response.json()
    assert summary["now"] == NOW.isoformat()
    assert summary["counts"] == {
        "all": 11,
        "scheduled": 8,
        "due": 2,
        "running": 3,
        "failing": 3,
        "orphaned": 2,
    }
    assert {kind: [t["name"] for t in ts] for kind, ts in summary["tasks"].items()} == {
        "recurring": ["cleanup", "nightly-report", "poll-feed"],
        "one_time": ["send-email"],
        "custom": ["sync-account"],
    }
    send_email = summary["tasks"]["one_time"][0]
    assert send_email["counts"] == {
        "all": 6, "scheduled": 4, "due": 0, "running": 2, "failing": 3
    }  # fmt: skip
    assert send_email["max_retries"] == 5
    recurring = {r["name"]: r for r in summary["recurring"]}
    assert recurring["nightly-report"]["schedule_words"] == "At 02:00"
    assert recurring["nightly-report"]["next_run"] == "2030-05-18T02:00:00+00:00"
    assert recurring["poll-feed"]["owner"] == "worker-2"
    assert recurring["cleanup"]["execution"] is None
    health = {e["instance_id"]: e["heartbeat_health"] for e in summary["running"]}
    assert health == {"invoice-7": "dead", "welcome-2": "late", "recurring": "ok"}
    ages = {e["instance_id"]: e["heartbeat_age_seconds"] for e in summary["running"]}
    assert ages == {"invoice-7": 2700.0, "welcome-2": 720.0, "recurring": 20.0}
    assert [e["instance_id"] for e in summary["failing"]] == [XSS, "bounce-3", "bounce-4"]
    assert [e["consecutive_failures"] for e in summary["failing"]] == [2, 3, 1]
    assert {e["task_name"] for e in summary["orphaned"]} == {"legacy-import", XSS_TASK}
    assert all(e["orphaned"] for e in summary["orphaned"])


async def test_listings_read_bounded_previews_not_whole_payloads(
    db: Harness, client: httpx.AsyncClient
) -> None:
    big = {"blob": "x" * 1_000_000, "id": 1}
    with db.sync_engine.begin() as conn:
        conn.execute(
            insert(table_for()),
            [
                row("send-email", f"big-{i}", NOW, data=big, consecutive_failures=1)
                for i in range(30)
            ],
        )
    response = await client.get("/api/executions", params={"per_page": 500})
    assert response.status_code == 200
    assert len(response.content) < 100_000, "a page of 30 one-megabyte payloads"
    listed = response.json()["executions"]
    assert len(listed) == 30
    assert all("data" not in e for e in listed)
    assert all(len(e["data_preview"]) == 80 and e["data_preview"].endswith("…") for e in listed)
    summary = (await client.get("/api/summary")).json()
    assert all("data" not in e for e in summary["failing"])
    page = await client.get("/executions", params={"per_page": 500})
    assert len(page.content) < 200_000
    one = (
        await client.get("/api/execution", params={"task": "send-email", "instance": "big-0"})
    ).json()
    assert one["data"] == big, "one execution's page has its payload in full"


async def test_api_executions_filters_and_pages(seeded: Harness, client: httpx.AsyncClient) -> None:
    async def get(**params: Any) -> dict[str, Any]:
        response = await client.get("/api/executions", params=params)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    everything = await get()
    assert (everything["total"], everything["pages"], everything["page"]) == (11, 1, 1)
    first = await get(per_page=4)
    second = await get(per_page=4, page=2)
    last = await get(per_page=4, page=3)
    beyond = await get(per_page=4, page=4)
    assert (first["pages"], len(first["executions"]), len(last["executions"])) == (3, 4, 3)
    keys = [
        (e["task_name"], e["instance_id"])
        for page in (first, second, last)
        for e in page["executions"]
    ]
    assert keys == [(e["task_name"], e["instance_id"]) for e in everything["executions"]]
    assert beyond["executions"] == []
    assert beyond["total"] == 11

    running = await get(state="running")
    assert {e["instance_id"] for e in running["executions"]} == {
        "invoice-7", "welcome-2", "recurring"
    }  # fmt: skip
    assert all(e["status"] == "running" for e in running["executions"])
    by_task = await get(task="send-email", state="failing")
    assert by_task["total"] == 3
    assert [e["instance_id"] for e in by_task["executions"]] == [XSS, "bounce-3", "bounce-4"]
    welcome = await get(instance="welcome")
    assert {e["instance_id"] for e in welcome["executions"]} == {"welcome-1", "welcome-2"}
    assert (await get(instance="come-"))["total"] == 2  # substring, not only prefix
    assert (await get(state="orphaned"))["total"] == 2
    assert (await get(state="due"))["total"] == 2

    for bad in ({"state": "bogus"}, {"page": "0"}, {"page": "x"}, {"per_page": "501"}):
        response = await client.get("/api/executions", params=bad)
        assert response.status_code == 400
        assert "error" in response.json()


async def test_like_wildcards_in_the_instance_filter_match_literally(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    for text, expected in (("%", 0), ("_", 0), ("welcome_1", 0), ("-", 7), ("e-1", 1)):
        response = await client.get("/api/executions", params={"instance": text})
        assert response.json()["total"] == expected, text
    with seeded.sync_engine.begin() as conn:
        conn.execute(insert(table_for()), [row("send-email", "50%_off/now", NOW)])
    for text, expected in (("%", 1), ("_", 1), ("0%_o", 1), ("/", 1), ("%_off/", 1), ("0__", 0)):
        response = await client.get("/api/executions", params={"instance": text})
        assert response.json()["total"] == expected, text


# --- 100,000 rows ----------------------------------------------------------------------


@pytest.mark.postgres_only("seeds with generate_series; large tables are PostgreSQL's case")
async def test_pages_work_with_100_000_rows(db: Harness, client: httpx.AsyncClient) -> None:
    """Every page and filter answers correctly over 100,000 rows. How fast they answer is
    not asserted here: on a loaded machine a timed assertion fails at random."""
    seed_many(db.sync_engine, 100_000)
    checks = {
        "/": None,
        "/api/summary": None,
        "/executions": 100_000,
        "/executions?page=1000": 100_000,
        "/executions?page=2000": 100_000,
        "/api/executions?page=1999&per_page=50": 100_000,
        "/executions?state=scheduled&page=900": 90_000,
        "/executions?state=running&page=150": 10_000,
        "/executions?state=failing&page=100": 14_285,
        "/api/executions?state=due": 0,
        "/executions?task=sync-account&page=500": 50_000,
        "/api/executions?instance=bulk-0999": 100,
        "/api/executions?task=sync-account&instance=99999": 1,
        "/api/executions?instance=%25": 0,
    }
    for path, total in checks.items():
        response = await answered(client, path)
        if total is not None and path.startswith("/api/"):
            assert response.json()["total"] == total, path
        elif total is not None:
            assert f"{total:,} execution" in response.text, path

    page = (await client.get("/api/executions?page=2000&per_page=50")).json()
    assert page["pages"] == 2000
    assert len(page["executions"]) == 50
    assert page["executions"][-1]["instance_id"] == "bulk-100000"
    html = (await client.get("/executions?page=2000")).text
    assert "Page 2,000 of 2,000" in html
    assert 'rel="prev" href="/executions?state=all&amp;page=1999"' in html
    assert 'rel="next"' not in html


async def test_a_row_no_scheduler_can_read_leaves_every_page_working(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    """A row written by hand with a time the driver cannot load (issue 13, defect 2: a
    year BC on PostgreSQL, a zero date on MariaDB) is left out of the listings and its
    page is a 404; every other row is listed as before."""
    before = (await client.get("/api/executions", params={"per_page": 500})).json()
    bad_time = "0000-00-00 00:00:00" if seeded.is_mariadb else "4000-01-01 00:00:00+00 BC"
    with seeded.sync_engine.begin() as conn:
        conn.execute(insert(table_for()), [row("send-email", "bad-time", NOW)])
        conn.execute(
            sql(
                f"update scheduled_tasks set execution_time = '{bad_time}', "
                "consecutive_failures = 1 where task_instance = 'bad-time'"
            )
        )
    for page in [*PAGES, "/api/executions", "/executions?state=due"]:
        response = await client.get(page)
        assert response.status_code == 200, page
        assert "bad-time" not in response.text, page
    after = (await client.get("/api/executions", params={"per_page": 500})).json()
    assert after["executions"] == before["executions"]
    one = await client.get("/execution", params={"task": "send-email", "instance": "bad-time"})
    assert one.status_code == 404


async def test_the_overview_counts_in_one_pass_what_the_state_counts_count(
    seeded: Harness, scheduler: Scheduler
) -> None:
    """The overview reads every task's counts in one pass and sums them for the header:
    the same numbers as the header's own count of each state and the per-task counts,
    orphaned executions (of the seed's unregistered task) included."""
    now, table, known = scheduler.clock.now(), scheduler.table, frozenset(scheduler.tasks)
    with seeded.sync_engine.connect() as conn:
        by_task = _store.counts_by_task(conn, statements_on(conn, table), now=now)
        header = _store.state_counts(conn, statements_on(conn, table), known_tasks=known, now=now)
        per_task = _store.task_counts(
            conn, statements_on(conn, table), names=sorted(known), now=now
        )
    assert min(header["orphaned"], header["failing"], header["running"]) > 0
    assert _store.state_totals(by_task, known) == header
    assert {name: c for name, c in by_task.items() if name in known} == per_task
