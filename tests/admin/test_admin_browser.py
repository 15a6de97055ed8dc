"""The admin page in a real headless Chromium (Debian's ``chromium``, driven by Playwright),
served by uvicorn on the loopback interface: sign-in, sections, hostile text that must not
run, the history and its dead letters, the nodes and paused tasks, each action (requeue,
pause and resume included), and a layout that fits the window at common widths.

Set ``SQLA_SCHEDULER_ADMIN_SCREENSHOT=docs/admin.png`` to keep the overview's screenshot.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from sqlalchemy import Engine, create_engine, select, update
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool
from starlette.applications import Starlette
from starlette.routing import Mount

from sqla_scheduler import ManualClock, Scheduler, one_time
from sqla_scheduler.admin import create_app
from sqla_scheduler.models import table_for
from tests.admin._browser import MOUNT, Watch, live, overflowing, signed_in
from tests.support.admin import (
    PASSWORD,
    USER,
    XSS,
    XSS_TASK,
    make_scheduler,
    seed,
    seed_history,
    seed_nodes,
)

# In one pytest-xdist worker: one Chromium for the module, started once.
pytestmark = pytest.mark.xdist_group("browser")

if TYPE_CHECKING:
    from playwright.sync_api import Browser


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def _row(engine: Engine, task: str, instance: str) -> Any:
    table = table_for()
    with engine.connect() as conn:
        return conn.execute(
            select(table).where(table.c.task_name == task, table.c.task_instance == instance)
        ).one_or_none()


@pytest.fixture
def engine(pg_url: str) -> Iterator[Engine]:
    """A sync engine on the test's database, disposed of after the test."""
    engine = create_engine(pg_url)
    yield engine
    engine.dispose()


@pytest.mark.slow
def test_read_only_page_in_a_browser(browser: Browser, pg_url: str, tmp_path: Path) -> None:
    """Slow by nature: a real Chromium loads and renders each read-only page in turn."""
    now = _now()
    sync_engine = create_engine(pg_url)
    seed(sync_engine, now)
    seed_nodes(sync_engine, now)
    # The page reads through an AsyncEngine here, on uvicorn's event loop; without a pool,
    # no connection outlives that loop.
    async_engine = create_async_engine(pg_url, poolclass=NullPool)
    scheduler = make_scheduler(async_engine, now)
    Scheduler(sync_engine, []).pause(sync_engine, "poll-feed")
    app = create_app(scheduler, username=USER, password=PASSWORD)
    outer = Starlette(routes=[Mount(MOUNT, app=app)])
    try:
        with live(outer) as base:
            # Without the right credentials the browser gets no page.
            anonymous = browser.new_context()
            denied = anonymous.request.get(f"{base}{MOUNT}/")
            assert denied.status == 401
            assert "Basic" in denied.headers["www-authenticate"]
            anonymous.close()
            wrong = browser.new_context(http_credentials={"username": USER, "password": "x"})
            wrong_page = wrong.new_page()
            refused = wrong_page.goto(f"{base}{MOUNT}/")
            assert refused is not None
            assert refused.status == 401
            assert "Authentication required." in wrong_page.content()
            assert wrong_page.locator("header.top").count() == 0
            wrong.close()

            context = browser.new_context(
                http_credentials={"username": USER, "password": PASSWORD},
                viewport={"width": 1440, "height": 900},
            )
            page = context.new_page()
            watch = Watch(page)
            response = page.goto(f"{base}{MOUNT}/")
            assert response is not None
            assert response.status == 200
            assert response.headers["content-security-policy"].startswith("default-src 'none'")

            # The stylesheet loaded under the policy.
            header = page.locator("header.top")
            assert header.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(24, 32, 46)"

            # Each section, with the seeded rows.
            cards = page.locator("#counts .card")
            assert cards.count() == 6
            assert page.locator("#counts .state-running .n").inner_text() == "3"
            assert page.locator("#tasks .kind").nth(0).locator("tbody tr").count() == 3
            recurring = page.locator("#recurring tbody tr")
            assert recurring.count() == 3
            assert "At 02:00" in recurring.nth(1).inner_text()
            assert "worker-2" in recurring.nth(2).inner_text()
            running = page.locator("#running tbody tr")
            assert running.count() == 3
            assert "dead" in page.locator("#running tr", has_text="invoice-7").inner_text()
            assert "late" in page.locator("#running tr", has_text="welcome-2").inner_text()
            failing = page.locator("#failing tbody tr")
            assert failing.count() == 3
            assert failing.nth(0).locator("a.instance").inner_text() == XSS  # shown as text
            orphaned = page.locator("#orphaned tbody tr")
            assert orphaned.count() == 2
            assert page.locator("#orphaned a.task", has_text=XSS_TASK).count() == 1

            # The nodes, the stale one said in words; the header counts the live ones.
            assert page.locator("a.nodes-alive").inner_text() == "2 nodes alive · 1 stale"
            nodes = page.locator("#nodes tbody tr")
            assert nodes.count() == 3
            assert "stale" in page.locator("#nodes tr", has_text="worker-3").inner_text()
            paused = page.locator("#tasks tr", has_text="poll-feed").locator(".badge.paused")
            assert paused.inner_text() == "paused"

            # Read-only: no action controls anywhere.
            assert page.locator("form[method=post]").count() == 0
            assert page.locator("button", has_text="Run now").count() == 0

            screenshot = Path(os.environ.get("SQLA_SCHEDULER_ADMIN_SCREENSHOT", tmp_path / "a.png"))
            page.screenshot(path=str(screenshot), full_page=True)
            assert screenshot.stat().st_size > 10_000

            # The hostile payload, on its own page: text, never markup.
            failing.nth(0).locator("a.instance").click()
            page.wait_for_load_state()
            assert page.locator("pre.payload").inner_text().count(XSS) == 1
            assert "<script>alert(2)</script>" in page.locator("pre.payload").inner_text()

            # A listing, filtered and paged through the form.
            page.goto(f"{base}{MOUNT}/executions")
            page.fill("input[name=instance]", "welcome")
            page.click("button[type=submit]")
            page.wait_for_load_state()
            assert page.locator("table.executions tbody tr").count() == 2
            assert "instance=welcome" in page.url

            # Auto-refresh is a meta tag, which the policy leaves alone.
            page.goto(f"{base}{MOUNT}/?refresh=2")
            with page.expect_event("load", timeout=6000):
                pass

            assert page.locator("img").count() == 0
            assert page.locator("svg:not(.chart):not(.swatch)").count() == 0  # the charts alone
            assert watch.dialogs == [], "injected script ran"
            assert watch.csp_violations() == []
            context.close()
    finally:
        sync_engine.dispose()


def test_actions_in_a_browser(browser: Browser, engine: Engine) -> None:
    now = _now()
    seed(engine, now)
    scheduler = make_scheduler(engine, now)
    app = create_app(scheduler, username=USER, password=PASSWORD, actions=True)
    with signed_in(browser, app, "/") as (base, page):
        # Run now, on the recurring task's row.
        page.locator("#recurring tr", has_text="nightly-report").get_by_text("Run now").click()
        page.wait_for_load_state()
        assert "Done: the execution was rescheduled to now." in page.inner_text("main")
        assert _row(engine, "nightly-report", "recurring").execution_time == now

        # Retry, on a failing execution.
        page.locator("#failing tr", has_text="bounce-3").get_by_text("Retry now").click()
        page.wait_for_load_state()
        assert "rescheduled to now for a retry" in page.inner_text("main")
        bounce = _row(engine, "send-email", "bounce-3")
        assert (bounce.execution_time, bounce.consecutive_failures) == (now, 3)

        # Delete, which asks first (a <details>, no script).
        orphan = page.locator("#orphaned tr", has_text="batch-2019")
        assert not orphan.get_by_text("Confirm delete").is_visible()
        orphan.get_by_text("Delete…").click()
        orphan.get_by_text("Confirm delete").click()
        page.wait_for_load_state()
        assert "was deleted" in page.inner_text("main")
        assert _row(engine, "legacy-import", "batch-2019") is None
        assert page.locator("#orphaned", has_text="batch-2019").count() == 0

        # An action on what changed since the page was shown does nothing.
        page.goto(f"{base}{MOUNT}/executions?instance=welcome-1")
        table = table_for()
        with engine.begin() as conn:
            conn.execute(
                update(table)
                .where(table.c.task_instance == "welcome-1")
                .values(execution_time=now + timedelta(days=3), version=table.c.version + 1)
            )
        page.get_by_text("Run now").click()
        page.wait_for_load_state()
        assert "Nothing was done" in page.inner_text("main")
        assert _row(engine, "send-email", "welcome-1").execution_time == now + timedelta(days=3)


def test_history_in_a_browser(browser: Browser, engine: Engine) -> None:
    now = _now()
    seed(engine, now)
    seed_history(engine, now)
    app = create_app(make_scheduler(engine, now), username=USER, password=PASSWORD)
    with signed_in(browser, app, "/") as (base, page):
        # The overview counts the failures of each task (history="failures") and
        # links to the dead letters with their count.
        counted = page.locator("#history table.outcomes")
        assert counted.locator("th.outcome-count").all_inner_texts() == ["Failed last 1 d"]
        send_email = counted.locator("tr", has_text="send-email")
        assert send_email.locator("td.failed").inner_text() == "2"
        assert send_email.locator("td.dead-letters").inner_text() == "1"
        dead_letters = page.locator("#history a.dead-letters")
        assert dead_letters.inner_text() == "Dead letters 3"
        dead_letters.click()
        page.wait_for_load_state()
        assert page.url == f"{base}{MOUNT}/dead-letters"
        rows = page.locator("table.history tbody tr")
        assert rows.count() == 3
        assert page.locator("table.history tbody tr .instance").nth(1).inner_text() == XSS
        # Read-only: nothing to requeue with.
        assert page.locator("button", has_text="Requeue").count() == 0
        assert page.locator("form[method=post]").count() == 0

        # Filtered through the form.
        page.select_option("select[name=outcome]", "abandoned")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        assert "outcome=abandoned" in page.url
        assert rows.count() == 2

        # The hostile entry's page: its error and payload are text, never markup.
        page.locator("table.history tr", has_text="send-email").locator("a.entry").click()
        page.wait_for_load_state()
        assert page.locator("h1 .badge").inner_text() == "abandoned"
        error = page.locator("pre.error").inner_text()
        assert error.startswith("ValueError: </pre><script>alert(6)</script>\nTraceback")
        payload = page.locator("pre.payload").inner_text()
        assert f'"html": "{XSS}"' in payload
        assert "</pre><script>alert(7)</script>" in payload

        # All of history, filtered by task and outcome, newest first.
        page.goto(f"{base}{MOUNT}/history")
        assert page.locator("table.history tbody tr").count() == 8
        page.select_option("select[name=task]", "send-email")  # a select of the known names
        page.select_option("select[name=outcome]", "failed")
        page.click("button[type=submit]")
        page.wait_for_load_state()
        attempts = page.locator("table.history tbody tr td:nth-child(7)").all_inner_texts()
        assert attempts == ["2", "1"]
        assert page.locator("code.error-line").first.inner_text() == (
            "OSError: mailbox unavailable"
        )

        assert page.locator("img").count() == 0


@one_time("charge", max_retries=0)
def _charge(ctx: Any) -> None:
    raise ValueError(f"card {ctx.payload['card']} declined")


def test_requeue_in_a_browser(browser: Browser, engine: Engine) -> None:
    now = _now()
    scheduler = Scheduler(engine, [_charge], clock=ManualClock(now))
    scheduler.schedule(engine, _charge.instance("c1", {"card": "4242"}))
    # Playwright's sync API holds this thread's event loop: run the scheduler in another.
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(anyio.run, scheduler.run_due).result(timeout=30) == 1
    assert _row(engine, "charge", "c1") is None  # abandoned: it left the table
    app = create_app(scheduler, username=USER, password=PASSWORD, actions=True)
    with signed_in(browser, app, "/dead-letters") as (base, page):
        row = page.locator("table.history tbody tr", has_text="c1")
        assert "ValueError: card 4242 declined" in row.inner_text()
        row.get_by_text("Requeue").click()
        page.wait_for_load_state()
        assert page.url.startswith(f"{base}{MOUNT}/dead-letters?done=requeue")
        notice = page.locator("p.notice").inner_text()
        assert notice == "Done: the execution was requeued: scheduled again, due now."
        requeued = _row(engine, "charge", "c1")
        assert requeued is not None
        assert (requeued.task_data, requeued.execution_time) == ({"card": "4242"}, now)

        # Its entry stays; its page now says the execution is back, and offers nothing.
        page.locator("table.history tr", has_text="c1").locator("a.entry").click()
        page.wait_for_load_state()
        back_in_table = page.locator("dl.fields a", has_text="an execution with this key")
        assert back_in_table.count() == 1
        assert page.locator("button", has_text="Requeue").count() == 0
        assert "requeue would do nothing" in page.locator(".detail-actions").inner_text()
        back_in_table.click()
        page.wait_for_load_state()
        assert "/execution?task=charge&instance=c1" in page.url
        assert '"card": "4242"' in page.locator("pre.payload").inner_text()


def test_nodes_and_pause_in_a_browser(browser: Browser, engine: Engine) -> None:
    now = _now()
    seed(engine, now)
    seed_history(engine, now)
    seed_nodes(engine, now)
    scheduler = make_scheduler(engine, now)
    app = create_app(scheduler, username=USER, password=PASSWORD, actions=True)
    with signed_in(browser, app, "/") as (base, page):
        header = page.locator("a.nodes-alive")
        assert header.inner_text() == "2 nodes alive · 1 stale"
        header.click()
        page.wait_for_load_state()
        assert page.url.endswith("/#nodes")
        stale = page.locator("#nodes tr", has_text="worker-3")
        assert stale.locator(".badge").inner_text() == "stale"
        assert "app-3" in stale.inner_text()
        assert page.locator("#nodes .badge.node-alive").count() == 2

        # Pause a task: its row says so, and offers Resume instead.
        row = page.locator("#tasks tr", has_text="send-email")
        assert row.locator(".badge.paused").count() == 0
        row.get_by_role("button", name="Pause").click()
        page.wait_for_load_state()
        notice = page.locator("p.notice").inner_text()
        assert notice.startswith("Done: the task was paused")
        assert scheduler.paused_tasks(engine) == {"send-email"}
        assert row.locator(".badge.paused").inner_text() == "paused"
        assert row.get_by_role("button", name="Pause").count() == 0
        row.get_by_role("button", name="Resume").click()
        page.wait_for_load_state()
        assert page.locator("p.notice").inner_text().startswith("Done: the task was resumed")
        assert scheduler.paused_tasks(engine) == frozenset()
        assert row.locator(".badge.paused").count() == 0

        # The overview fits the window, with its buttons and a paused task's badge.
        scheduler.pause(engine, "nightly-report")
        for width in (800, 1400, 1920):
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(f"{base}{MOUNT}/")
            assert page.locator("#nodes tbody tr").count() == 3
            assert overflowing(page) == [], (width, overflowing(page))
            # Asked to confirm a delete, the row still fits.
            page.locator("#failing tr", has_text="bounce-4").get_by_text("Delete…").click()
            assert overflowing(page) == [], (width, overflowing(page))
