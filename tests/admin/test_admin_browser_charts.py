"""The overview's activity charts in a real headless Chromium, after a drain: the bars
have height, the lines are drawn, nothing breaks the Content-Security-Policy, and in the
light and the dark colour scheme the charts' text contrasts with their background by
4.5:1 at least (WCAG AA).

Set ``SQLA_SCHEDULER_ADMIN_SCREENSHOTS=docs`` to keep the charts' screenshots in both
schemes."""

from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from sqlalchemy import Engine, create_engine

from sqla_scheduler import ManualClock, Scheduler, SchedulerConfig, one_time
from sqla_scheduler.admin import create_app
from tests.admin._browser import Watch, live
from tests.support import sqlite_file_url
from tests.support.admin import PASSWORD, USER

pytestmark = pytest.mark.xdist_group("browser")

if TYPE_CHECKING:
    from playwright.sync_api import Browser


#: The colour behind an element: its own background, or its nearest ancestor's.
_BACKGROUND = (
    "e => { for (; e; e = e.parentElement) { const c = getComputedStyle(e).backgroundColor;"
    " if (c !== 'rgba(0, 0, 0, 0)') return c } return 'rgb(255, 255, 255)' }"
)


def _luminance(rgb: str) -> float:
    channels = [int(c) / 255 for c in re.findall(r"\d+", rgb)[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(one: str, other: str) -> float:
    high, low = sorted((_luminance(one), _luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_the_charts_render_after_a_drain(
    browser: Browser, sqlite_template: Path, tmp_path: Path
) -> None:
    engine = create_engine(sqlite_file_url(sqlite_template, tmp_path))
    try:
        _drain_and_look(browser, engine)
    finally:
        engine.dispose()


def _drain_and_look(browser: Browser, engine: Engine) -> None:
    now = datetime.now(timezone.utc).replace(microsecond=0)
    clock = ManualClock(now)

    def work(ctx: Any) -> None:
        clock.advance(timedelta(milliseconds=25))

    def fail(ctx: Any) -> None:
        raise RuntimeError("no")

    ok, bad = one_time("ok")(work), one_time("bad")(fail)
    scheduler = Scheduler(engine, [ok, bad], SchedulerConfig(), clock=clock)
    batch = [ok.instance(f"o{i}", at=now - timedelta(seconds=1)) for i in range(6)]
    scheduler.schedule_batch(engine, [*batch, bad.instance("b", at=now)])
    with ThreadPoolExecutor(1) as thread:  # Playwright's own event loop runs on this one
        assert thread.submit(anyio.run, scheduler.run_due).result() == 7
    app = create_app(scheduler, username=USER, password=PASSWORD)
    with live(app) as base:
        for scheme in ("light", "dark"):
            context = browser.new_context(
                http_credentials={"username": USER, "password": PASSWORD},
                viewport={"width": 1400, "height": 900},
                color_scheme=scheme,
            )
            page = context.new_page()
            watch = Watch(page)
            page.goto(f"{base}/")
            bars = page.locator("#activity svg.chart-bars g.bar rect")
            assert bars.count() == 2  # succeeded and failed, stacked in this minute's bar
            for i in range(bars.count()):
                box = bars.nth(i).bounding_box()
                assert box is not None
                assert box["height"] > 1, scheme
            title = page.locator("#activity g.bar title").text_content()
            assert title is not None
            assert "6 succeeded, 1 failed" in title
            assert page.locator("#activity svg.chart-lines circle").count() == 4
            chart = page.locator("#activity svg.chart-bars")
            background = chart.evaluate("e => getComputedStyle(e).backgroundColor")
            for text in ("text.axis", "text:not(.axis)"):
                fills = page.locator(f"#activity svg.chart-bars {text}").evaluate_all(
                    "es => es.map(e => getComputedStyle(e).fill)"
                )
                for fill in fills:
                    assert _contrast(fill, background) >= 4.5, (scheme, text, fill, background)
            shots = os.environ.get("SQLA_SCHEDULER_ADMIN_SCREENSHOTS")
            if shots:  # kept for the docs: docs/admin-charts-light.png, -dark.png
                page.locator("#activity").screenshot(
                    path=str(Path(shots) / f"admin-charts-{scheme}.png")
                )
            legend = page.locator("#activity ul.legend").first
            ink = legend.evaluate("e => getComputedStyle(e).color")
            panel = page.locator("#activity").evaluate(_BACKGROUND)
            assert _contrast(ink, panel) >= 4.5, (scheme, ink, panel)
            # the task chosen through the form, no script needed
            page.select_option("#activity-task", "bad")
            page.click("#activity button[type=submit]")
            page.wait_for_load_state()
            assert "task=bad" in page.url
            assert page.locator("#activity svg.chart-bars g.bar rect").count() == 1
            assert watch.dialogs == []
            assert watch.csp_violations() == []
            context.close()
