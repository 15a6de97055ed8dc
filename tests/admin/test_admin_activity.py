"""The overview's activity charts and ``/api/activity`` over HTTP, after a drain with the
default ``history="failures"``: bars by outcome with their numbers on hover, percentile
lines, a hostile task name escaped in the choice and the charts' titles, an empty period
said in words, and a 400 naming a wrong parameter. On SQLite: the reads' SQL on every
database is tests/integration/test_activity.py's."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from markupsafe import escape

from sqla_scheduler import ManualClock, Scheduler, SchedulerConfig, one_time
from sqla_scheduler.admin import create_app
from tests.support import NOW, Harness
from tests.support.admin import PASSWORD, USER, XSS_TASK, client_for, start_tags

pytestmark = pytest.mark.anyio


@pytest.fixture
async def drained(sqlite: Harness) -> AsyncIterator[tuple[httpx.AsyncClient, ManualClock]]:
    """3 successes of ``ok`` 2 s late taking 40 ms each, and 2 failures of the hostile
    task, in the minute before ``NOW + 1 min``; an admin app on them."""
    clock = ManualClock(NOW)

    def work(ctx: Any) -> None:
        clock.advance(timedelta(milliseconds=40))

    def fail(ctx: Any) -> None:
        raise RuntimeError("no")

    ok, hostile = one_time("ok")(work), one_time(XSS_TASK)(fail)
    scheduler = Scheduler(sqlite.engine, [ok, hostile], SchedulerConfig(), clock=clock)
    due = NOW - timedelta(seconds=2)
    batch = [ok.instance(f"o{i}", at=due) for i in range(3)]
    batch += [hostile.instance(f"h{i}", at=due) for i in range(2)]
    scheduler.schedule_batch(sqlite.engine, batch)
    assert await scheduler.run_due() == 5
    app = create_app(scheduler, username=USER, password=PASSWORD)
    async with client_for(app) as client:
        yield client, clock


async def test_the_overview_charts_the_drain(
    drained: tuple[httpx.AsyncClient, ManualClock],
) -> None:
    client, _ = drained
    page = await client.get("/")
    assert page.status_code == 200, page.text
    html = page.text
    assert 'id="activity"' in html
    assert "5 in the last hour" in html
    bars = re.findall(
        r'<rect class="outcome-(\w+)" x="[\d.]+" y="[\d.]+" width="[\d.]+" height="([\d.]+)"', html
    )
    assert sorted(outcome for outcome, _ in bars) == ["failed", "succeeded"]
    heights = {outcome: float(height) for outcome, height in bars}
    assert heights["succeeded"] > heights["failed"] > 0  # 3 over 2, stacked in one bar
    assert "12:00 UTC (minute): 3 succeeded, 2 failed" in html
    # one minute measured: each of lag and duration p50 and p95 is a dot
    assert html.count("<circle ") == 4
    # the chosen task is the hostile one's name, escaped wherever it shows
    tags = start_tags(html)
    options = [dict(attrs).get("value") for tag, attrs in tags if tag == "option"]
    assert options == ["all", XSS_TASK, "ok"]
    assert XSS_TASK not in html
    assert str(escape(XSS_TASK)) in html


async def test_one_task_is_charted_alone_with_its_name_escaped(
    drained: tuple[httpx.AsyncClient, ManualClock],
) -> None:
    client, _ = drained
    page = await client.get("/", params={"task": XSS_TASK, "span": "day"})
    assert page.status_code == 200, page.text
    assert XSS_TASK not in page.text
    assert f"Executions per 15 minutes of {escape(XSS_TASK)}</title>" in page.text
    assert "2 in the last day" in page.text
    assert "2 failed" in page.text
    assert (
        "succeeded"
        not in re.sub(r"<select.*?</select>", "", page.text, flags=re.S)
        .split('id="activity"')[1]
        .split("</section>")[0]
    )
    selected = [
        a for tag, a in start_tags(page.text) if tag == "option" and ("selected", None) in a
    ]
    assert [dict(a)["value"] for a in selected] == [XSS_TASK]


async def test_the_api_gives_the_points_and_percentiles(
    drained: tuple[httpx.AsyncClient, ManualClock],
) -> None:
    client, _ = drained
    hour = (await client.get("/api/activity")).json()
    assert hour["span"] == "hour"
    assert hour["task"] is None
    assert hour["counts"] == {"succeeded": 3, "failed": 2}
    assert len(hour["points"]) == 60
    assert hour["points"][-1]["counts"] == {"succeeded": 3, "failed": 2}
    assert hour["step_seconds"] == 60
    # 40 ms each: in the bucket from 20 to 50 ms; the lags from 2 s on, in 2 to 5 s
    one = (await client.get("/api/activity", params={"task": "ok"})).json()
    assert one["counts"] == {"succeeded": 3}
    assert 20 <= one["duration_ms"]["p50"] < 50
    assert one["duration_ms"]["mean"] == 40
    assert 2000 <= one["lag_ms"]["p95"] < 5000
    day = (await client.get("/api/activity", params={"span": "day", "task": "all"})).json()
    assert len(day["points"]) == 96
    assert day["step_seconds"] == 900
    assert sum(sum(p["counts"].values()) for p in day["points"]) == 5


async def test_an_empty_period_is_said_in_words(
    drained: tuple[httpx.AsyncClient, ManualClock],
) -> None:
    client, clock = drained
    clock.advance(timedelta(hours=2))
    page = await client.get("/")
    assert page.status_code == 200
    assert page.text.count("no executions in the last hour") == 2
    assert '<rect class="outcome-' not in page.text
    day = await client.get("/", params={"span": "day"})
    assert "no executions in the last day" not in day.text  # the day still holds them
    assert (await client.get("/api/activity")).json()["counts"] == {}


@pytest.mark.parametrize(
    ("path", "params", "message"),
    [
        ("/", {"span": "week"}, "span must be one of hour, day, got 'week'"),
        ("/api/activity", {"span": "week"}, "span must be one of hour, day, got 'week'"),
        ("/api/activity", {"task": "t" * 101}, "task is longer than 100 characters"),
        ("/api/activity", {"since": "1h"}, "unknown parameter 'since'"),
    ],
)
async def test_a_wrong_parameter_is_a_400_naming_it(
    drained: tuple[httpx.AsyncClient, ManualClock], path: str, params: dict[str, str], message: str
) -> None:
    client, _ = drained
    response = await client.get(path, params=params)
    assert response.status_code == 400
    if path.startswith("/api/"):
        assert message in response.json()["error"]
    else:
        assert str(escape(message)) in response.text
