"""Finding things and bulk actions by click, in a real headless Chromium: type a filter,
choose a task, sort by clicking a header, run a bulk retry through its confirmation."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import Engine, create_engine, select

from sqla_scheduler.admin import create_app
from sqla_scheduler.models import table_for
from tests.admin._browser import signed_in
from tests.support.admin import PASSWORD, USER, XSS, make_scheduler, seed

pytestmark = pytest.mark.xdist_group("browser")

if TYPE_CHECKING:
    from playwright.sync_api import Browser


def _failing(engine: Engine) -> list[Any]:
    table = table_for()
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(table.c.task_instance, table.c.execution_time, table.c.version)
                .where(table.c.consecutive_failures > 0)
                .order_by(table.c.task_instance)
            )
        )


def test_find_sort_and_bulk_retry_by_click(browser: Browser, pg_url: str) -> None:
    now = datetime.now(timezone.utc).replace(microsecond=0)
    engine = create_engine(pg_url)
    seed(engine, now)
    app = create_app(make_scheduler(engine, now), username=USER, password=PASSWORD, actions=True)
    try:
        with signed_in(browser, app, "/executions") as (_, page):
            rows = page.locator("table.executions tbody tr")
            assert rows.count() == 11

            # Choose a task and type a part of an error, then filter.
            page.locator('select[name="task"]').select_option("send-email")
            page.locator('input[name="error"]').fill("MAILBOX")
            page.get_by_role("button", name="Filter").click()
            page.wait_for_load_state()
            assert rows.count() == 1
            assert "bounce-3" in rows.first.inner_text()
            assert "OSError: mailbox unavailable" in rows.first.inner_text()

            # Widen to the failing ones and sort by clicking a header, each way.
            page.locator('input[name="error"]').fill("")
            page.locator('select[name="state"]').select_option("failing")
            page.get_by_role("button", name="Filter").click()
            page.wait_for_load_state()
            instances = page.locator("table.executions tbody tr a.instance")
            assert instances.all_inner_texts() == [XSS, "bounce-3", "bounce-4"]  # latest failure
            page.locator('a.sort[data-sort="failures"]').click()
            page.wait_for_load_state()
            assert instances.all_inner_texts() == ["bounce-3", XSS, "bounce-4"]
            header = page.locator("th[aria-sort]")
            assert header.get_attribute("aria-sort") == "descending"
            page.locator('a.sort[data-sort="failures"]').click()
            page.wait_for_load_state()
            assert instances.all_inner_texts() == ["bounce-4", XSS, "bounce-3"]
            assert header.get_attribute("aria-sort") == "ascending"
            assert page.locator('select[name="task"]').input_value() == "send-email"

            # Retry them all: the confirmation counts them, the click does it.
            before = _failing(engine)
            page.locator('a[data-bulk="retry"]').click()
            page.wait_for_load_state()
            assert "3 executions will be rescheduled to now for a retry." in page.inner_text("main")
            assert _failing(engine) == before  # nothing yet
            page.locator('button[data-action="bulk-retry"]').click()
            page.wait_for_load_state()
            assert "Done: 3 executions were rescheduled to now for a retry." in page.inner_text(
                "main"
            )
            assert "state=failing" in page.url
            after = _failing(engine)
            assert [(i, t) for i, t, _ in after] == [(i, now) for i, _, _ in before]
            assert [v for _, _, v in after] == [v + 1 for _, _, v in before]
    finally:
        engine.dispose()
