"""A running execution's progress in a real headless Chromium: a scheduler runs a handler
that reports, and the admin page served beside it shows the report as a bar whose value
is the percent reported (in the page, and as a progress bar with that value in
Chromium's accessibility tree) with its message to read; the handler's next report shows
on the next load, at a narrow window too, with nothing sticking out."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from sqlalchemy import create_engine

from sqla_scheduler import Scheduler, SchedulerConfig, one_time
from sqla_scheduler.admin import create_app
from tests.admin._browser import live, narrow_wraps, overflowing
from tests.support import sqlite_file_url, wait_for
from tests.support.admin import PASSWORD, USER

pytestmark = pytest.mark.xdist_group("browser")

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

INSTANCE = "2030-05-17.csv"
BAR_NAME = f"Progress of import-file / {INSTANCE}"


def _ax_progress_bars(context: BrowserContext, page: Page) -> list[dict[str, Any]]:
    """The progress bars in Chromium's own accessibility tree (what a screen reader is
    given): each one's name, value (``valuenow``) and value properties."""
    cdp = context.new_cdp_session(page)
    try:
        nodes = cdp.send("Accessibility.getFullAXTree")["nodes"]
    finally:
        cdp.detach()
    return [
        {
            "name": node.get("name", {}).get("value"),
            "valuenow": node.get("value", {}).get("value"),
            **{p["name"]: p["value"]["value"] for p in node.get("properties", [])},
        }
        for node in nodes
        if node.get("role", {}).get("value") == "progressbar"
    ]


def _wait(condition: Callable[[], bool]) -> None:
    """``wait_for`` the condition, bounded, in another thread: Playwright's sync API holds
    this thread's event loop."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(anyio.run, wait_for, condition).result(timeout=30)


def _bar(page: Page) -> dict[str, Any]:
    """The running list's bar: its value, max and the position it draws (value / max)."""
    bar = page.locator("#running").get_by_role("progressbar", name=BAR_NAME)
    return dict(bar.evaluate("p => ({value: p.value, max: p.max, position: p.position})"))


def test_a_handlers_report_shows_as_a_bar_with_its_value(
    browser: Browser, sqlite_template: Path, tmp_path: Path
) -> None:
    go_on = [threading.Event(), threading.Event()]

    @one_time("import-file")
    def import_file(ctx: Any) -> None:
        for step, (fraction, done) in enumerate([(0.25, 250), (0.75, 750)]):
            ctx.report_progress(fraction, f"{done} of 1000 rows")
            go_on[step].wait(30)

    engine = create_engine(sqlite_file_url(sqlite_template, tmp_path))
    config = SchedulerConfig(polling_interval=timedelta(milliseconds=20))
    scheduler = Scheduler(engine, [import_file], config)

    def written(fraction: float) -> bool:
        execution = scheduler.get_execution(engine, "import-file", INSTANCE)
        progress = None if execution is None else execution.progress
        return progress is not None and progress.fraction == fraction

    scheduler.schedule(engine, import_file.instance(INSTANCE))
    scheduler.start()
    context = browser.new_context(
        http_credentials={"username": USER, "password": PASSWORD},
        viewport={"width": 1400, "height": 900},
    )
    try:
        with live(create_app(scheduler, username=USER, password=PASSWORD)) as base:
            page = context.new_page()
            _wait(lambda: written(0.25))
            page.goto(base + "/")
            assert _bar(page) == {"value": 25, "max": 100, "position": 0.25}
            row = page.locator("#running tbody tr", has_text=INSTANCE)
            assert row.locator(".progress-text").inner_text() == "25%"
            assert row.locator(".progress-message").inner_text() == "250 of 1000 rows"
            [bar] = _ax_progress_bars(context, page)
            assert (bar["name"], bar["valuenow"], bar["valuemax"]) == (BAR_NAME, 25, 100)

            go_on[0].set()
            _wait(lambda: written(0.75))
            page.set_viewport_size({"width": 800, "height": 900})
            page.reload()
            assert _bar(page) == {"value": 75, "max": 100, "position": 0.75}
            assert row.locator(".progress-message").inner_text() == "750 of 1000 rows"
            assert overflowing(page) == []
            assert narrow_wraps(page) == []
            page.goto(base + f"/execution?task=import-file&instance={INSTANCE}")
            whole = page.get_by_role("progressbar", name=BAR_NAME)
            assert whole.evaluate("p => p.value") == 75
            assert page.locator("dd .progress-message").inner_text() == "750 of 1000 rows"
            assert overflowing(page) == []
    finally:
        context.close()
        for event in go_on:
            event.set()
        scheduler.stop()
        engine.dispose()
