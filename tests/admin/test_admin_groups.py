"""The admin page's groups over HTTP, on every database through sync and async engines:
the listing newest first with each group's progress bar and outcomes, its filter and
pages; a group's page with its callback's state and its finished members (bounded
previews, newest first, paged); cancel as ``Scheduler.cancel_group`` does, CSRF-checked;
a waiting callback and a member shown as such in the executions; hostile names, ids and
values escaped."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from itertools import pairwise
from typing import Any

import httpx
import pytest
from sqlalchemy import text as sql
from starlette.applications import Starlette
from starlette.routing import Mount

from sqla_scheduler import Group, ManualClock, Scheduler, one_time
from sqla_scheduler.admin import create_app
from tests.support import NOW, Harness
from tests.support.admin import (
    PASSWORD,
    SECRET,
    TOKEN,
    USER,
    XSS,
    XSS_ESCAPED,
    answered,
    assert_inert,
    client_for,
)

pytestmark = pytest.mark.anyio

#: A callback task whose name would run script if a page put it in HTML unescaped.
HOSTILE_TASK = "<script>alert(11)</script>"
#: What a member's handler returns when its payload asks for hostile markup.
HOSTILE_VALUE = {"html": XSS, "note": "</code><script>alert(12)</script>"}


def _work(ctx: Any) -> Any:
    if ctx.payload == "fail":
        raise RuntimeError(f"</code><script>alert(13)</script> {ctx.instance_id} failed")
    if ctx.payload == "hostile":
        return HOSTILE_VALUE
    if ctx.payload == "big":
        return {"blob": "x" * 60_000}
    return {"n": ctx.payload}


member = one_time("member", max_retries=0)(_work)
report = one_time("report", keep_result=True)(lambda ctx: "sent")
hostile = one_time(HOSTILE_TASK)(lambda ctx: None)
step = one_time("step")(lambda ctx: None)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(NOW)


@pytest.fixture
def scheduler(db: Harness, clock: ManualClock) -> Scheduler:
    return db.scheduler([member, report, hostile, step], clock)


def _app(scheduler: Scheduler, **options: Any) -> Any:
    return create_app(scheduler, username=USER, password=PASSWORD, secret=SECRET, **options)


@pytest.fixture
async def client(scheduler: Scheduler) -> Any:
    async with client_for(_app(scheduler, actions=True)) as c:
        yield c


async def _group(
    db: Harness, scheduler: Scheduler, payloads: dict[str, Any], then: Any, **at: Any
) -> Group:
    members = [member.instance(name, payload, **at) for name, payload in payloads.items()]
    group: Group = await db.resolve(scheduler.schedule_group(db.engine, members, then=then))
    return group


class Seeded:
    """Five groups, one a minute from ``NOW``, oldest first: ``done`` (every member
    finished, one abandoned, and its callback ran); ``open`` (one of two members
    finished; its callback, of a hostile task and instance id, waits) and ``bare`` (two
    members due tomorrow, no callback); ``cancelled`` (two members due in an hour,
    cancelled, with a chain of two links: the second link waits for the first in a group
    of its own, ``link``, cancelled with it)."""

    def __init__(self, done: Group, open_: Group, bare: Group, cancelled: Group) -> None:
        self.done, self.open, self.bare, self.cancelled = done, open_, bare, cancelled


@pytest.fixture
async def seeded(db: Harness, scheduler: Scheduler, clock: ManualClock) -> Seeded:
    done = await _group(db, scheduler, {"d1": 1, "d2": "fail", "d3": 3}, report.instance("weekly"))
    assert await scheduler.run_due() == 4  # the members, then the callback they released
    clock.advance(timedelta(minutes=1))
    tomorrow = NOW + timedelta(days=1)
    members = [member.instance("o1", "hostile"), member.instance("o2", 2, at=tomorrow)]
    open_ = await db.resolve(
        scheduler.schedule_group(db.engine, members, then=hostile.instance(XSS))
    )
    assert await scheduler.run_due() == 1
    bare = await _group(db, scheduler, {"b1": 1, "b2": 2}, None, at=tomorrow)
    clock.advance(timedelta(minutes=1))
    cancelled = await _group(
        db,
        scheduler,
        {"c1": 1, "c2": 2},
        [step.instance("s1"), step.instance("s2")],
        at=NOW + timedelta(hours=1),
    )
    assert await db.resolve(scheduler.cancel_group(db.engine, cancelled.id)) == 4
    return Seeded(done, open_, bare, cancelled)


async def _json(client: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any]:
    response = await client.get(path, params=params)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


async def test_groups_are_listed_newest_first_with_their_progress(
    seeded: Seeded, client: httpx.AsyncClient
) -> None:
    listing = await _json(client, "/api/groups")
    assert (listing["total"], listing["pages"]) == (5, 1)
    groups = listing["groups"]
    # by creation, newest first (ordered by id within one instant)
    assert [g["created_at"] for g in groups] == [
        (NOW + timedelta(minutes=n)).isoformat() for n in (2, 2, 1, 1, 0)
    ]
    same_instant = [(a, b) for a, b in pairwise(groups) if a["created_at"] == b["created_at"]]
    assert len(same_instant) == 2
    assert all(a["id"] > b["id"] for a, b in same_instant)
    assert seeded.cancelled.id in {g["id"] for g in groups[:2]}
    assert {g["id"] for g in groups[2:4]} == {seeded.open.id, seeded.bare.id}
    by_id = {g["id"]: g for g in groups}
    assert groups[-1] == {
        "id": seeded.done.id,
        "task_name": "report",
        "instance_id": "weekly",
        "status": "finished",
        "total": 3,
        "remaining": 0,
        "done": 3,
        "outcomes": {"succeeded": 2, "abandoned": 1},
        "created_at": NOW.isoformat(),
        "finished_at": NOW.isoformat(),
        "cancelled_at": None,
    }
    opened = by_id[seeded.open.id]
    assert (opened["task_name"], opened["instance_id"], opened["status"]) == (
        HOSTILE_TASK,
        XSS,
        "in_progress",
    )
    assert (opened["done"], opened["total"], opened["outcomes"]) == (1, 2, {"succeeded": 1})
    bare = by_id[seeded.bare.id]
    assert (bare["task_name"], bare["done"], bare["total"], bare["outcomes"]) == (None, 0, 2, {})
    cancelled = by_id[seeded.cancelled.id]
    assert (cancelled["status"], cancelled["outcomes"], cancelled["remaining"]) == (
        "cancelled",
        {"cancelled": 2},
        0,
    )
    assert cancelled["cancelled_at"] == (NOW + timedelta(minutes=2)).isoformat()

    html = (await client.get("/groups")).text
    assert "5 groups · page 1 of 1" in html
    assert 'aria-current="page">Groups</a>' in html
    rows = {
        int(m.group(1)): m.group(0)
        for m in re.finditer(
            r'<tr>\s*<td><a class="group" href="/groups/(\d+)".*?</tr>', html, re.S
        )
    }
    assert list(rows) == [g["id"] for g in groups]
    done_row = rows[seeded.done.id]
    assert (
        f'<progress class="group-finished" max="3" value="3" aria-label="Group '
        f'{seeded.done.id}: 3 of 3 members finished">100%</progress>'
    ) in done_row
    assert "3 of 3 finished" in done_row
    assert '<span class="badge outcome-succeeded">succeeded 2</span>' in done_row
    assert '<span class="badge outcome-abandoned">abandoned 1</span>' in done_row
    assert '<span class="badge group-finished">finished</span>' in done_row
    open_row = rows[seeded.open.id]
    assert '<progress class="group-in_progress" max="2" value="1"' in open_row
    assert ">50%</progress>" in open_row
    assert "not finished 1" in open_row
    assert '<span class="badge group-in_progress">in progress</span>' in open_row
    assert '<span class="none">none</span>' in rows[seeded.bare.id]  # no callback
    assert "cancelled <time" in rows[seeded.cancelled.id]


async def test_groups_filter_by_callback_task_and_page(
    seeded: Seeded, client: httpx.AsyncClient
) -> None:
    async def ids(**params: Any) -> list[int]:
        return [g["id"] for g in (await _json(client, "/api/groups", **params))["groups"]]

    every = await ids()
    assert await ids(task="report") == [seeded.done.id]
    assert await ids(task=HOSTILE_TASK) == [seeded.open.id]
    chain = await ids(task="step")  # the chain's two links, each awaiting a group
    assert len(chain) == 2
    assert seeded.cancelled.id in chain
    assert await ids(task="no-such-task") == []
    pages = [await _json(client, "/api/groups", per_page=3, page=n) for n in (1, 2, 3)]
    assert [len(p["groups"]) for p in pages] == [3, 2, 0]
    assert all((p["total"], p["pages"]) == (5, 2) for p in pages)
    assert [g["id"] for p in pages for g in p["groups"]] == every

    html = (await client.get("/groups", params={"per_page": 1, "page": 2})).text
    assert "5 groups · page 2 of 5" in html
    assert 'rel="next" href="/groups?page=3"' in html
    html = (await client.get("/groups", params={"task": "report"})).text
    assert 'href="/groups">Clear filters</a>' in html
    assert "1 group · page 1 of 1" in html

    for path, status, says in [
        ("/groups?task=" + "t" * 101, 400, "task is longer than 100 characters"),
        ("/api/groups?per_page=501", 400, "per_page must be at most 500"),
        ("/api/groups?since=1h", 400, "unknown parameter 'since'"),
        ("/groups?task=a%00b", 400, "NUL character"),
        ("/groups/abc", 400, "group id must be a positive whole number"),
        ("/groups/0", 400, "group id must be a positive whole number"),
        ("/api/groups/99999999999999999999", 400, "group id must be a positive whole number"),
        (f"/api/groups/{seeded.done.id}?task=x", 400, "unknown parameter 'task'"),
        ("/groups/12345", 404, "There is no group 12345."),
        ("/api/groups/12345", 404, "There is no group 12345."),
    ]:
        response = await client.get(path)
        assert response.status_code == status, path
        assert says in response.text, path


async def test_a_group_page_shows_its_callback_and_its_finished_members(
    db: Harness, scheduler: Scheduler, clock: ManualClock, client: httpx.AsyncClient
) -> None:
    group = await _group(
        db, scheduler, {"a": "big", "b": "fail", "c": "big", "d": 4}, report.instance("r")
    )
    page = await _json(client, f"/api/groups/{group.id}")
    assert page["callback"]["state"] == "waiting"
    assert page["callback"]["execution"]["waiting"] is True
    assert page["callback"]["execution"]["awaits"] == group.id
    assert (page["members_listed"], page["members"], page["status"]) == (0, [], "in_progress")
    html = (await client.get(f"/groups/{group.id}")).text
    assert '<span class="badge callback-waiting">waiting</span>' in html
    assert '<progress class="group-in_progress" max="4" value="0"' in html
    assert "No finished member." in html
    assert "Cancel group…" in html

    # the members run; their last one makes the callback due
    assert await scheduler.run_due() == 5
    page = await _json(client, f"/api/groups/{group.id}", per_page=3)
    assert (page["status"], page["done"], page["members_listed"], page["pages"]) == (
        "finished",
        4,
        4,
        2,
    )
    assert page["outcomes"] == {"succeeded": 3, "abandoned": 1}
    assert page["callback"]["state"] == "finished"
    assert page["callback"]["execution"] is None
    assert page["callback"]["result"]["outcome"] == "succeeded"
    assert page["callback"]["result"]["value_preview"] == '"sent"'
    # newest first, in pages; each value cut to its preview in the database
    second = await _json(client, f"/api/groups/{group.id}", per_page=3, page=2)
    listed = [m["instance_id"] for m in page["members"] + second["members"]]
    assert sorted(listed) == ["a", "b", "c", "d"]
    ids = [m["id"] for m in page["members"] + second["members"]]
    assert ids == sorted(ids, reverse=True)
    big = [m for m in page["members"] + second["members"] if m["instance_id"] in "ac"]
    assert all(m["value_preview"] == json.dumps({"blob": "x" * 60_000})[:199] + "…" for m in big)
    failed = next(m for m in page["members"] + second["members"] if m["instance_id"] == "b")
    assert failed["error_line"].startswith("RuntimeError: </code><script>alert(13)")
    response = await client.get(f"/groups/{group.id}")
    assert len(response.content) < 30_000, "two values of 60KB are shown as previews"
    html = response.text
    assert '<span class="badge callback-finished">finished</span>' in html
    assert 'href="/results?task=report&amp;instance=r">its result →</a>' in html
    assert "Nothing left to cancel: every member has finished and the callback is finished." in (
        html
    )
    assert "Cancel group…" not in html


async def test_cancel_through_the_page_cancels_the_group(
    db: Harness, scheduler: Scheduler, client: httpx.AsyncClient
) -> None:
    later = {"at": NOW + timedelta(hours=1)}
    group = await _group(db, scheduler, {"x": 1, "y": 2}, report.instance("after"), **later)
    form = {"csrf": TOKEN, "id": str(group.id), "back": f"/groups/{group.id}"}

    refused = await client.post("/actions/cancel-group", data={**form, "csrf": "0" * 64})
    assert refused.status_code == 403
    assert db.count() == 3

    response = await client.post("/actions/cancel-group", data=form)
    assert response.status_code == 303, response.text
    assert response.headers["location"] == f"/groups/{group.id}?done=cancel-group"
    assert db.count() == 0
    page = await client.get(response.headers["location"])
    assert "Done: the group was cancelled" in page.text
    assert '<span class="badge group-cancelled">cancelled</span>' in page.text
    assert '<span class="badge callback-cancelled">cancelled</span>' in page.text
    assert '<span class="badge outcome-cancelled">cancelled 2</span>' in page.text
    assert "Cancel group…" not in page.text

    again = await client.post("/actions/cancel-group", data=form)
    assert again.status_code == 409
    assert f"group {group.id} was cancelled already" in again.text
    unknown = await client.post("/actions/cancel-group", data={**form, "id": "12345"})
    assert unknown.status_code == 404
    assert "there is no group 12345" in unknown.text
    bad = await client.post("/actions/cancel-group", data={**form, "id": "x"})
    assert bad.status_code == 400

    async with client_for(_app(scheduler)) as read_only:
        html = (await read_only.get(f"/groups/{group.id}")).text
        assert "<form" not in html
        assert (await read_only.post("/actions/cancel-group", data=form)).status_code == 405


async def test_a_waiting_callback_and_a_member_are_shown_with_their_group(
    db: Harness, scheduler: Scheduler, client: httpx.AsyncClient
) -> None:
    group = await _group(
        db, scheduler, {"m": 1}, report.instance("cb"), at=NOW + timedelta(hours=1)
    )
    link = f'<a class="group" href="/groups/{group.id}">group {group.id}</a>'
    for path in ("/executions", "/executions?state=scheduled"):
        html = (await client.get(path)).text
        assert f"waiting for {link}" in html, path
        assert f'<small class="member-of">in {link}</small>' in html, path
        assert "9999" not in html, path
        assert '<span class="badge status-waiting">waiting</span>' in html, path
    # the callback has no Run now (its group's last member makes it due), only Delete
    callback_row = re.search(r"<tr>(?:(?!</tr>).)*?>cb</a>.*?</tr>", html, re.S)
    assert callback_row is not None
    assert "/actions/run-now" not in callback_row.group(0)
    assert "/actions/delete" in callback_row.group(0)

    html = (await client.get("/execution", params={"task": "report", "instance": "cb"})).text
    assert f"<dt>Callback of</dt><dd>{link}" in html
    assert "9999" not in html
    assert "A callback waiting for its group is not run now" in html
    member_page = (await client.get("/execution", params={"task": "member", "instance": "m"})).text
    assert f"<dt>Member of</dt><dd>{link}</dd>" in member_page

    api = await _json(client, "/api/execution", task="report", instance="cb")
    assert (api["status"], api["waiting"], api["awaits"], api["group_id"]) == (
        "waiting",
        True,
        group.id,
        None,
    )
    assert (await _json(client, "/api/execution", task="member", instance="m"))["group_id"] == (
        group.id
    )

    # run now, posted by hand, is refused: it would run the callback before its member
    form = {"csrf": TOKEN, "task": "report", "instance": "cb", "version": "1", "back": "/"}
    refused = await client.post("/actions/run-now", data=form)
    assert refused.status_code == 409
    assert f"the callback of group {group.id} and waits for its members" in refused.text
    assert db.row("report", "cb")["execution_time"].year == 9999  # type: ignore[index]


async def test_group_pages_escape_hostile_names_ids_and_values(
    seeded: Seeded, scheduler: Scheduler
) -> None:
    app = _app(scheduler, actions=True)
    async with client_for(Starlette(routes=[Mount("/admin/jobs", app=app)])) as client:
        pages = {
            "listing": (await client.get("/admin/jobs/groups")).text,
            "filtered": (
                await client.get("/admin/jobs/groups", params={"task": HOSTILE_TASK})
            ).text,
            "open": (await client.get(f"/admin/jobs/groups/{seeded.open.id}")).text,
            "done": (await client.get(f"/admin/jobs/groups/{seeded.done.id}")).text,
            "executions": (await client.get("/admin/jobs/executions")).text,
        }
    for name, html in pages.items():
        assert "<script>alert" not in html, name
        assert "<img" not in html, name
        assert_inert(html, name)
    assert "&lt;script&gt;alert(11)&lt;/script&gt;" in pages["listing"]  # the callback task
    assert XSS_ESCAPED in pages["listing"]  # its instance id
    assert 'value="&lt;script&gt;alert(11)&lt;/script&gt;"' in pages["filtered"]
    # the hostile member's value, as text in its cell and its title
    assert "&lt;/code&gt;&lt;script&gt;alert(12)&lt;/script&gt;&#34;}</code>" in pages["open"]
    assert pages["open"].count("<code") == pages["open"].count("</code>")
    assert "RuntimeError: &lt;/code&gt;&lt;script&gt;alert(13)&lt;/script&gt;" in pages["done"]
    assert "&lt;script&gt;alert(11)&lt;/script&gt;" in pages["open"]


@pytest.mark.postgres_only("seeds with generate_series; large tables are PostgreSQL's case")
async def test_group_pages_work_with_100_000_groups(db: Harness, client: httpx.AsyncClient) -> None:
    """Every page of groups and of a big group's members answers correctly over 100,000
    groups, one of them with 20,000 finished members. How fast is not asserted here: on a
    loaded machine a timed assertion fails at random."""
    with db.sync_engine.begin() as conn:
        conn.execute(
            sql(
                """
                insert into scheduled_tasks_groups (
                    id, task_name, task_instance, total, remaining, created_at, finished_at)
                select g, case when g % 4 = 0 then 'report' else 'step' end, 'cb-' || g,
                    10, g % 11, :now - make_interval(secs => g),
                    case when g % 11 = 0 then :now - make_interval(secs => g) end
                from generate_series(1, 100000) as g
                """
            ),
            {"now": NOW},
        )
        conn.execute(
            sql(
                """
                insert into scheduled_tasks_results (
                    task_name, task_instance, outcome, value, finished_at, group_id)
                select 'member', 'm-' || g,
                    case when g % 10 = 0 then 'abandoned' else 'succeeded' end,
                    case when g % 10 = 0 then null else '{"n": ' || g || '}' end,
                    :now - make_interval(secs => 100000 - g), 7
                from generate_series(1, 20000) as g
                """
            ),
            {"now": NOW},
        )
        conn.execute(sql("analyze scheduled_tasks_groups"))
        conn.execute(sql("analyze scheduled_tasks_results"))
    checks = {
        "/groups": 100_000,
        "/api/groups?page=2000&per_page=50": 100_000,
        "/api/groups?task=report&page=500": 25_000,
        "/groups?task=step&page=1000": 75_000,
        "/api/groups/7?page=400": 20_000,
        "/groups/7?page=2&per_page=500": 20_000,
    }
    for path, total in checks.items():
        response = await answered(client, path)
        if path.startswith("/api/groups/"):
            assert response.json()["members_listed"] == total, path
        elif path.startswith("/api/"):
            assert response.json()["total"] == total, path
        elif path.startswith("/groups/"):
            assert f'Finished members <span class="count">{total:,}</span>' in response.text
        else:
            assert f"{total:,} groups" in response.text, path
    last = (await client.get("/api/groups?page=2000&per_page=50")).json()
    assert [g["id"] for g in last["groups"]][-1] == 100_000  # the oldest
    seven = (await client.get("/api/groups/7?page=400")).json()
    assert seven["outcomes"] == {"succeeded": 18_000, "abandoned": 2_000}
    assert [m["instance_id"] for m in seven["members"]][-1] == "m-1"  # the oldest
