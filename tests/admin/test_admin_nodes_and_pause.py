"""The overview's nodes (alive or stale, as ``Scheduler.nodes`` judges them) and paused
tasks, and the pause and resume actions."""

from __future__ import annotations

import logging
import re
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import insert

from sqla_scheduler import ManualClock, Scheduler, SchedulerConfig
from sqla_scheduler.admin import create_app
from sqla_scheduler.admin._security import csrf_token
from sqla_scheduler.models import nodes_table, table_for
from tests.support import NOW, Harness
from tests.support.admin import (
    PASSWORD,
    SECRET,
    TASKS,
    TOKEN,
    USER,
    XSS,
    XSS_ESCAPED,
    client_for,
    node_row,
    seed_nodes,
    start_tags,
)

# the admin reads and acts through the same bridge with either engine; its SQL
# (previews, counts, pages) is the same for a database's two drivers
pytestmark = [pytest.mark.anyio, pytest.mark.databases(async_on=["postgresql"])]


def section(html: str, name: str) -> str:
    found = re.search(rf'<section id="{name}".*?</section>', html, re.S)
    assert found is not None, name
    return found.group(0)


def brand(html: str) -> str:
    """The header's part before the state links."""
    found = re.search(r'<header class="top">(.*?)<nav class="states">', html, re.S)
    assert found is not None
    return found.group(1)


def task_row(html: str, name: str) -> str:
    found = re.search(
        rf'<tr[^>]*>\s*<td><a class="task"[^>]*>{re.escape(name)}</a>.*?</tr>', html, re.S
    )
    assert found is not None, name
    return found.group(0)


def paused_now(db: Harness, scheduler: Scheduler) -> frozenset[str]:
    return scheduler.paused_tasks(db.sync_engine)


# --- nodes ------------------------------------------------------------------------------


async def test_without_nodes_the_header_says_none_is_alive(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    html = (await client.get("/")).text
    assert "0 nodes alive" in brand(html)
    assert "none-alive" in brand(html)
    assert "No scheduler is running on this table" in section(html, "nodes")
    summary = (await client.get("/api/summary")).json()
    assert summary["nodes"] == {
        "alive": 0,
        "stale": 0,
        "stale_after_seconds": 90.0,
        "nodes": [],
    }


async def test_the_overview_lists_the_nodes_alive_or_stale(
    seeded: Harness, client: httpx.AsyncClient, scheduler: Scheduler
) -> None:
    seed_nodes(seeded.sync_engine)
    html = (await client.get("/")).text
    assert "2 nodes alive" in brand(html)
    assert "1 stale" in brand(html)
    nodes = section(html, "nodes")
    rows = re.findall(r'<tr class="node-row-(\w+)">(.*?)</tr>', nodes, re.S)
    assert [(state, re.search(r"worker-\d", cells).group(0)) for state, cells in rows] == [  # type: ignore[union-attr]
        ("alive", "worker-1"),
        ("alive", "worker-2"),
        ("stale", "worker-3"),
    ]
    stale = rows[2][1]
    # Every field, the state as text (not only a colour).
    for text in ("app-3", ">stale<", "1174", "2030-05-15 08:15:00 UTC", "11:15:00 UTC", "0.8.2"):
        assert text in stale, text
    assert "45 min ago" in stale
    # The JSON has each node as ``Node.to_json`` has it, judged by the same rule.
    summary = (await client.get("/api/summary")).json()
    listed = await seeded.resolve(scheduler.nodes(seeded.engine))
    assert summary["nodes"]["nodes"] == [node.to_json() for node in listed]
    assert [n["alive"] for n in summary["nodes"]["nodes"]] == [True, True, False]
    assert (summary["nodes"]["alive"], summary["nodes"]["stale"]) == (2, 1)


async def test_alive_is_judged_by_the_node_heartbeat_interval(seeded: Harness) -> None:
    """Alive within three ``node_heartbeat_interval``s of now, stale after: the rule of
    ``Node.alive``, with the interval the scheduler is configured with."""
    interval = timedelta(seconds=30)
    with seeded.sync_engine.begin() as conn:
        conn.execute(
            insert(nodes_table(table_for())),
            [
                node_row("edge-1", NOW - 3 * interval),
                node_row("edge-2", NOW - 3 * interval - timedelta(seconds=1)),
            ],
        )
    for configured, expected in ((interval, [True, False]), (10 * interval, [True, True])):
        scheduler = Scheduler(
            seeded.engine,
            TASKS,
            SchedulerConfig(node_heartbeat_interval=configured),
            clock=ManualClock(NOW),
        )
        app = create_app(scheduler, username=USER, password=PASSWORD)
        async with client_for(app) as client:
            summary = (await client.get("/api/summary")).json()
        assert [n["alive"] for n in summary["nodes"]["nodes"]] == expected
        assert summary["nodes"]["stale_after_seconds"] == 3 * configured.total_seconds()


async def test_every_page_header_counts_the_nodes(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    seed_nodes(seeded.sync_engine)
    for path in (
        "/executions?state=running",
        "/execution?task=send-email&instance=welcome-1",
        "/history",
        "/dead-letters",
    ):
        response = await client.get(path)
        assert response.status_code == 200, path
        assert "2 nodes alive" in brand(response.text), path


async def test_node_fields_are_text(seeded: Harness, client: httpx.AsyncClient) -> None:
    with seeded.sync_engine.begin() as conn:
        conn.execute(
            insert(nodes_table(table_for())),
            [node_row("n-1", NOW, host=XSS, version=XSS), node_row(XSS, NOW, host="app-9")],
        )
    html = (await client.get("/")).text
    nodes = section(html, "nodes")
    assert nodes.count(XSS_ESCAPED) == 3
    assert XSS not in html
    assert not [tag for tag, _ in start_tags(html) if tag == "img"]


# --- paused tasks -----------------------------------------------------------------------


async def test_paused_tasks_are_marked_in_words(
    seeded: Harness, client: httpx.AsyncClient, scheduler: Scheduler
) -> None:
    assert scheduler.pause(seeded.sync_engine, "send-email")
    assert scheduler.pause(seeded.sync_engine, "poll-feed")
    html = (await client.get("/")).text
    tasks = section(html, "tasks")
    assert ">paused</span>" in task_row(tasks, "send-email")
    assert ">paused</span>" in task_row(tasks, "poll-feed")
    for name in ("nightly-report", "cleanup", "sync-account"):
        assert "paused" not in task_row(tasks, name), name
    # The recurring task is marked in its own section too.
    recurring = section(html, "recurring")
    assert ">paused</span>" in task_row(recurring, "poll-feed")
    assert "paused" not in task_row(recurring, "cleanup")
    # Read-only: no buttons (the only form is the charts' task choice, a GET).
    assert 'method="post"' not in html
    assert "data-action=" not in html
    summary = (await client.get("/api/summary")).json()
    assert summary["paused"] == ["poll-feed", "send-email"]
    flags = {t["name"]: t["paused"] for views in summary["tasks"].values() for t in views}
    assert flags == {
        "nightly-report": False,
        "poll-feed": True,
        "cleanup": False,
        "send-email": True,
        "sync-account": False,
    }


async def test_without_actions_pause_and_resume_are_refused(
    seeded: Harness, client: httpx.AsyncClient, scheduler: Scheduler
) -> None:
    assert scheduler.pause(seeded.sync_engine, "poll-feed")
    for action, task in (("pause", "send-email"), ("resume", "poll-feed")):
        response = await client.post(f"/actions/{action}", data={"csrf": TOKEN, "task": task})
        assert response.status_code == 405
    assert paused_now(seeded, scheduler) == {"poll-feed"}


async def test_pause_then_resume_a_task(
    actions: httpx.AsyncClient,
    seeded: Harness,
    scheduler: Scheduler,
    caplog: pytest.LogCaptureFixture,
) -> None:
    html = (await actions.get("/")).text
    row = task_row(section(html, "tasks"), "send-email")
    assert 'action="/actions/pause"' in row
    assert f'name="csrf" value="{TOKEN}"' in row
    assert len(re.findall(r'action="/actions/pause"', section(html, "tasks"))) == len(TASKS)

    form = {"csrf": TOKEN, "task": "send-email", "back": "/?refresh=30"}
    with caplog.at_level(logging.INFO, logger="sqla_scheduler.admin"):
        response = await actions.post("/actions/pause", data=form)
    assert response.status_code == 303
    assert response.headers["location"] == "/?refresh=30&done=pause"
    assert paused_now(seeded, scheduler) == {"send-email"}
    [record] = [r for r in caplog.records if r.name == "sqla_scheduler.admin"]
    assert record.__dict__["admin_action"] == "pause"
    assert record.__dict__["task_name"] == "send-email"
    assert record.__dict__["done"] is True

    html = (await actions.get(response.headers["location"])).text
    assert "Done: the task was paused" in html
    row = task_row(section(html, "tasks"), "send-email")
    assert ">paused</span>" in row
    assert 'action="/actions/resume"' in row
    assert 'action="/actions/pause"' not in row

    again = await actions.post("/actions/pause", data=form)
    assert again.status_code == 409
    assert "paused already" in again.text

    response = await actions.post("/actions/resume", data=form)
    assert response.status_code == 303
    assert paused_now(seeded, scheduler) == frozenset()
    html = (await actions.get(response.headers["location"])).text
    assert "Done: the task was resumed" in html
    assert "paused" not in task_row(section(html, "tasks"), "send-email")

    again = await actions.post("/actions/resume", data=form)
    assert again.status_code == 409
    assert "not paused" in again.text


async def test_a_task_paused_elsewhere_and_not_registered_here_can_be_resumed(
    actions: httpx.AsyncClient, seeded: Harness, scheduler: Scheduler
) -> None:
    assert scheduler.pause(seeded.sync_engine, "legacy-import")
    html = (await actions.get("/")).text
    also = re.search(r'<p class="more paused-unregistered">.*?</p>', html, re.S)
    assert also is not None
    assert "legacy-import" in also.group(0)
    assert 'action="/actions/resume"' in also.group(0)
    response = await actions.post("/actions/resume", data={"csrf": TOKEN, "task": "legacy-import"})
    assert response.status_code == 303
    assert paused_now(seeded, scheduler) == frozenset()
    assert "paused-unregistered" not in (await actions.get("/")).text


@pytest.mark.parametrize(
    ("action", "data", "status"),
    [
        ("pause", {"task": "send-email", "csrf": "0" * 64}, 403),
        ("pause", {"task": "send-email"}, 403),
        ("resume", {"task": "send-email", "csrf": csrf_token(SECRET, "other")}, 403),
        ("pause", {"task": "not-registered", "csrf": TOKEN}, 404),
        ("pause", {"task": "", "csrf": TOKEN}, 400),
        ("pause", {"task": " send-email", "csrf": TOKEN}, 400),
        ("resume", {"task": "x" * 300, "csrf": TOKEN}, 400),
        ("pause", {"task": "send-email\x00", "csrf": TOKEN}, 400),
    ],
)
async def test_bad_pause_and_resume_requests_change_nothing(
    actions: httpx.AsyncClient,
    seeded: Harness,
    scheduler: Scheduler,
    action: str,
    data: dict[str, Any],
    status: int,
) -> None:
    assert scheduler.pause(seeded.sync_engine, "send-email")
    response = await actions.post(f"/actions/{action}", data=data)
    assert response.status_code == status, response.text
    assert paused_now(seeded, scheduler) == {"send-email"}


async def test_run_now_on_a_paused_task_waits_for_the_resume(
    actions: httpx.AsyncClient, seeded: Harness, scheduler: Scheduler
) -> None:
    """As ``Scheduler.run_now``: the execution is due now, and a pause still holds it."""
    assert scheduler.pause(seeded.sync_engine, "send-email")
    response = await actions.post(
        "/actions/run-now",
        data={"csrf": TOKEN, "task": "send-email", "instance": "welcome-1", "version": "1"},
    )
    assert response.status_code == 303
    after = seeded.row("send-email", "welcome-1")
    assert after is not None
    assert after["execution_time"] == NOW
    assert await scheduler.run_due() == 0  # paused: nothing of it runs
    assert seeded.row("send-email", "welcome-1") is not None
