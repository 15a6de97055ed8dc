"""A running execution's progress on the admin page, over HTTP in process: a bar of its
percent with its message on the overview's running list and in the executions listing,
the whole report on the execution's own page, and the report in the JSON twins
(``tests.support.admin.seed``: ``poll-feed`` reported a fraction and a message,
``welcome-2`` a message alone, ``invoice-7`` nothing)."""

from __future__ import annotations

import re
from datetime import timedelta

import httpx
import pytest
from sqlalchemy import update

from sqla_scheduler.models import table_for
from tests.support import NOW, Harness
from tests.support.admin import POLL_PROGRESS, WELCOME_PROGRESS, XSS, XSS_ESCAPED

# the pages read the progress columns with the rest of the row, through either engine
pytestmark = [pytest.mark.anyio, pytest.mark.databases(async_on=["postgresql"])]

#: The bar of ``poll-feed``'s report, as each page writes it.
POLL_BAR = (
    '<progress max="100" value="42" aria-label="Progress of poll-feed / recurring">42%</progress>'
)


def _section(html: str, name: str) -> str:
    match = re.search(rf'<section id="{name}".*?</section>', html, re.S)
    assert match, f"no section {name!r}"
    return match.group(0)


def _rows(html: str) -> dict[str, str]:
    """Each row of the page's tables by the execution it links to, ``task/instance`` (as
    the link's query has them)."""
    link = r'<a class="instance" href="/execution\?task=([^&"]+)&amp;instance=([^&"]+)"'
    rows = re.findall(r"<tr[^>]*>.*?</tr>", html, re.S)
    return {"/".join(found.groups()): row for row in rows if (found := re.search(link, row))}


def _report(db: Harness, instance: str, **values: object) -> None:
    table = table_for()
    with db.sync_engine.begin() as conn:
        conn.execute(update(table).where(table.c.task_instance == instance).values(**values))


async def test_the_running_list_shows_a_bar_and_the_message(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    running = _rows(_section((await client.get("/")).text, "running"))
    assert set(running) == {"poll-feed/recurring", "send-email/welcome-2", "send-email/invoice-7"}
    poll = running["poll-feed/recurring"]
    assert POLL_BAR in poll
    assert '<span class="progress-text" aria-hidden="true">42%</span>' in poll
    message = POLL_PROGRESS[1]
    assert f'<span class="progress-message" title="{message}">{message}</span>' in poll
    # a message alone: no bar, the message
    welcome = running["send-email/welcome-2"]
    assert "<progress" not in welcome
    assert f">{WELCOME_PROGRESS}</span>" in welcome
    # nothing reported: a dash where the bar would be
    assert "<progress" not in running["send-email/invoice-7"]
    assert "progress-message" not in running["send-email/invoice-7"]
    assert "<th>Progress</th>" in _section((await client.get("/")).text, "running")


async def test_the_executions_listing_shows_the_bar_under_running(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    listed = _rows((await client.get("/executions")).text)
    assert (
        '<span class="badge status-running">running</span><div class="run-progress">'
        in (listed["poll-feed/recurring"])
    )
    assert POLL_BAR in listed["poll-feed/recurring"]
    assert f">{WELCOME_PROGRESS}</span>" in listed["send-email/welcome-2"]
    reporting = ("poll-feed/recurring", "send-email/welcome-2")
    others = [row for name, row in listed.items() if name not in reporting]
    assert len(others) == 9
    assert [row for row in others if "run-progress" in row] == []


async def test_the_execution_page_shows_the_whole_report_and_when_it_was_written(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    html = (await client.get("/execution?task=poll-feed&instance=recurring")).text
    assert POLL_BAR in html
    assert f'<span class="progress-message">{POLL_PROGRESS[1]}</span>' in html
    reported = re.search(r"<dt>Progress reported</dt><dd>(.*?)</dd>", html, re.S)
    assert reported is not None
    at = NOW - timedelta(seconds=2)
    assert f'<time datetime="{at.isoformat()}"' in reported.group(1)
    assert "2 s ago" in reported.group(1)
    # running, nothing reported yet: a dash; not running: no progress at all
    dead = (await client.get("/execution?task=send-email&instance=invoice-7")).text
    assert re.search(r'<dt>Progress</dt><dd><span class="none">—</span></dd>', dead)
    assert "Progress reported" not in dead
    waiting = (await client.get("/execution?task=send-email&instance=welcome-1")).text
    assert "<dt>Progress" not in waiting


async def test_the_json_twins_carry_the_report(seeded: Harness, client: httpx.AsyncClient) -> None:
    at = (NOW - timedelta(seconds=2)).isoformat()
    poll = {"fraction": POLL_PROGRESS[0], "percent": 42, "message": POLL_PROGRESS[1], "at": at}
    summary = (await client.get("/api/summary")).json()
    running = {f"{e['task_name']}/{e['instance_id']}": e["progress"] for e in summary["running"]}
    assert running == {
        "poll-feed/recurring": poll,
        "send-email/welcome-2": {
            "fraction": None,
            "percent": None,
            "message": WELCOME_PROGRESS,
            "at": (NOW - timedelta(minutes=13)).isoformat(),
        },
        "send-email/invoice-7": None,
    }
    listed = (await client.get("/api/executions", params={"state": "running"})).json()
    found = {f"{e['task_name']}/{e['instance_id']}": e["progress"] for e in listed["executions"]}
    assert found == running
    failing = (await client.get("/api/executions", params={"state": "failing"})).json()
    assert {e["progress"] for e in failing["executions"]} == {None}
    one = (await client.get("/api/execution?task=poll-feed&instance=recurring")).json()
    assert one["progress"] == poll


async def test_a_long_or_hostile_message_is_cut_by_the_page_and_escaped(
    seeded: Harness, client: httpx.AsyncClient
) -> None:
    """A message of 1,024 characters: a listing's line has its first 80 (the stylesheet
    shows what fits) and its title the whole; the execution's page has it whole. Markup in
    a message is text."""
    long = ("rows " * 205)[:1024]
    _report(seeded, "recurring", progress=1.0, progress_message=long)
    _report(seeded, "welcome-2", progress=0.29, progress_message=XSS)
    running = _rows(_section((await client.get("/")).text, "running"))
    poll = running["poll-feed/recurring"]
    assert 'value="100"' in poll
    assert f'<span class="progress-message" title="{long}">{long[:79]}…</span>' in poll
    page = (await client.get("/execution?task=poll-feed&instance=recurring")).text
    assert f'<span class="progress-message">{long}</span>' in page
    hostile = running["send-email/welcome-2"]
    assert 'value="29"' in hostile  # 0.29 is 29%, though its double is just below
    assert f'title="{XSS_ESCAPED}">{XSS_ESCAPED}</span>' in hostile
    assert XSS not in hostile
    page = (await client.get("/execution?task=send-email&instance=welcome-2")).text
    assert f'<span class="progress-message">{XSS_ESCAPED}</span>' in page
    assert XSS not in page
