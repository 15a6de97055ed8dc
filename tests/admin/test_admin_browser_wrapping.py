"""The admin page's text in a real headless Chromium with the names a real deployment has
(issue 46): long task names, node names made of a host name and a process id, errors of a
database that went away, a running handler's long progress message. At 800, 1400 and 1920
px no text wraps in a box narrower than six of its characters, and a node's name breaks
only where it has a separator; the last error shows a readable start with the whole line
in its title; the task kinds' boxes share the width by what they hold; the filters keep a
time field and its "UTC" together; and in the dark scheme the form controls are dark too.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from sqlalchemy import create_engine, insert

from sqla_scheduler import ManualClock, Scheduler, custom, one_time, recurring
from sqla_scheduler.admin import create_app
from sqla_scheduler.models import history_table, nodes_table, results_table, table_for
from tests.admin._browser import live, mid_word_breaks, narrow_wraps, overflowing
from tests.support import sqlite_file_url
from tests.support.admin import PASSWORD, USER, entry_row, node_row, result_row, row

pytestmark = pytest.mark.xdist_group("browser")

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

WIDTHS = (800, 1400, 1920)
#: The error of a database that went away, as the failing executions keep it.
CONNECTION_ERROR = (
    "ConnectionError: could not connect to server at db-primary.internal:5432: "
    "Connection refused\nTraceback (most recent call last):\n  ..."
)
#: What a long report's handler says it is doing: longer than a listing's cell shows.
PROGRESS_MESSAGE = (
    "rendering the quarterly report: section 7 of 12, invoices by region and currency "
    "(EUR, USD, GBP) to s3://acc-adminui-exports/reports/2030-q2/invoices-by-region.pdf"
)
#: Names the way a deployment on Kubernetes makes them: a pod's host name and a pid.
NODES = [f"acc-adminui-worker-5d8c7b9f64-{pod}" for pod in ("q7xkz", "m2hbd", "t9wrc")]


@recurring("acc-adminui-rec-cron", "CRON|0 0 2 * * ?")
def rec_cron(ctx: Any) -> None:
    pass


@recurring("acc-adminui-rec-fixed", "FIXED_RATE|5m")
def rec_fixed(ctx: Any) -> None:
    pass


@one_time("acc-adminui-once-ok")
def once_ok(ctx: Any) -> None:
    pass


@one_time("acc-adminui-once-failing-connection", max_retries=5)
def once_failing(ctx: Any) -> None:
    pass


@one_time("acc-adminui-once-slow-transactional-report", keep_result=True)
def once_slow(ctx: Any) -> None:
    pass


#: A name as a module path makes it: no hyphen, nowhere to break.
@one_time("acc.adminui.tasks.export_nightly_invoices_to_s3")
def export_invoices(ctx: Any) -> None:
    pass


@custom("acc-adminui-custom-business-hours")
def custom_hours(ctx: Any) -> None:
    pass


TASKS = [rec_cron, rec_fixed, once_ok, once_failing, once_slow, export_invoices, custom_hours]


def _seed(engine: Any, now: datetime) -> None:
    m, h = timedelta(minutes=1), timedelta(hours=1)
    failing, slow = once_failing.name, once_slow.name
    rows = [
        row(
            rec_cron.name,
            "recurring",
            now + h,
            schedule="CRON|0 0 2 * * ?",
            picked=True,
            picked_by=NODES[0] + "-41213",
            last_heartbeat=now - timedelta(seconds=5),
            last_success=now - 23 * h,
            progress=1.0,
            progress_message="finishing: writing the summary",
            progress_at=now - timedelta(seconds=1),
        ),
        row(rec_fixed.name, "recurring", now + 5 * m, schedule="FIXED_RATE|5m"),
        *(
            row(
                failing,
                f"acc-adminui-order-{n:04d}",
                now + n * m,
                data={"order": n},
                consecutive_failures=n,
                last_failure=now - n * m,
                last_error=CONNECTION_ERROR,
            )
            for n in range(1, 4)
        ),
        row(
            slow,
            "acc-adminui-report-2030-q2",
            now - 3 * m,
            data={"quarter": "2030-Q2"},
            picked=True,
            picked_by=NODES[1] + "-41377",
            last_heartbeat=now - timedelta(seconds=8),
            progress=0.583,
            progress_message=PROGRESS_MESSAGE,
            progress_at=now - timedelta(seconds=2),
        ),
        row(once_ok.name, "acc-adminui-ok-1", now + 2 * h, data={"n": 1}),
        row(custom_hours.name, "acc-adminui-hours", now + 3 * h),
        row("acc-adminui-removed-legacy-import", "acc-adminui-legacy-1", now - h),
    ]
    entries = [
        entry_row(failing, "acc-adminui-order-0009", "failed", now - 2 * h, error=CONNECTION_ERROR),
        entry_row(
            failing,
            "acc-adminui-order-0009",
            "abandoned",
            now - h,
            data={"order": 9},
            error=CONNECTION_ERROR,
            picked_by=NODES[2] + "-40999",
        ),
        entry_row(slow, "acc-adminui-report-2030-q1", "succeeded", now - 30 * m),
    ]
    results = [
        result_row(slow, "acc-adminui-report-2030-q1", "succeeded", now - 30 * m, value={"ok": 1}),
        result_row(failing, "acc-adminui-order-0009", "abandoned", now - h, error=CONNECTION_ERROR),
    ]
    nodes = [
        node_row(
            name + f"-{pid}",
            now - timedelta(seconds=seen),
            host=name,
            pid=pid,
            running=1,
        )
        for name, pid, seen in zip(NODES, (41213, 41377, 40999), (3, 12, 2700), strict=True)
    ]
    table = table_for()
    with engine.begin() as conn:
        conn.execute(insert(table), rows)
        conn.execute(insert(history_table(table)), entries)
        conn.execute(insert(results_table(table)), results)
        conn.execute(insert(nodes_table(table)), nodes)


@pytest.fixture(scope="module")
def site(browser: Browser, sqlite_template: Path, tmp_path_factory: Any) -> Iterator[str]:
    """The admin page, actions on, over a SQLite file seeded with long names; its base URL."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    engine = create_engine(sqlite_file_url(sqlite_template, tmp_path_factory.mktemp("wrap")))
    try:
        _seed(engine, now)
        scheduler = Scheduler(engine, tasks=TASKS, clock=ManualClock(now))
        members = [once_ok.instance(f"acc-adminui-member-{n}", {"n": n}) for n in range(3)]
        scheduler.schedule_group(engine, members, then=once_ok.instance("acc-adminui-then"))
        app = create_app(scheduler, username=USER, password=PASSWORD, actions=True)
        with live(app) as base:
            yield base
    finally:
        engine.dispose()


#: The pages the layout tests visit, with these names in them.
PAGES = (
    "/",
    "/executions",
    "/executions?state=running",
    "/executions?state=scheduled",
    "/executions?state=due",
    "/executions?state=failing",
    "/executions?state=orphaned",
    "/history",
    "/dead-letters",
    "/results",
    "/groups",
    f"/execution?task={once_failing.name}&instance=acc-adminui-order-0001",
    f"/execution?task={once_slow.name}&instance=acc-adminui-report-2030-q2",
)


@contextlib.contextmanager
def _page(browser: Browser, **options: Any) -> Iterator[Page]:
    """A page of a new context of ``browser`` (signed in, 1400 px wide, with ``options``),
    closed on leaving."""
    context = browser.new_context(
        http_credentials={"username": USER, "password": PASSWORD},
        viewport={"width": 1400, "height": 900},
        **options,
    )
    try:
        yield context.new_page()
    finally:
        context.close()


def test_no_text_wraps_in_a_column_of_a_few_letters(browser: Browser, site: str) -> None:
    """At 800 px the nodes' names and hosts wrapped in columns 31 and 39 px wide
    (``acc-adminui-`` a line, broken inside words too): no text wraps narrower than six of
    its characters, and a name breaks only at its separators; what is still too wide
    scrolls in its table's box, and nothing sticks out of the page."""
    with _page(browser) as page:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            for path in PAGES:
                page.goto(site + path)
                where = (width, path)
                assert narrow_wraps(page) == [], (where, narrow_wraps(page))
                assert mid_word_breaks(page) == [], (where, mid_word_breaks(page))
                assert overflowing(page) == [], (where, overflowing(page))


#: The pages that show errors' first lines.
ERROR_PAGES = ("/", "/executions", "/executions?state=failing", "/history", "/dead-letters")
#: Each error's first line: its title, its own width and the width of it in view in its
#: table's first view (inside its scroll box, left of a sticky Actions column), and the
#: width of ``chars`` characters of its font.
_ERRORS = """(chars) => {
    const pen = document.createElement("canvas").getContext("2d");
    const out = [];
    for (const e of document.querySelectorAll("code.error-line")) {
        if (!e.checkVisibility()) continue;
        const r = e.getBoundingClientRect();
        let [left, right] = [r.left, r.right];
        const box = e.closest(".scroll");
        if (box) {
            const b = box.getBoundingClientRect();
            [left, right] = [Math.max(left, b.left), Math.min(right, b.right)];
            const last = e.closest("tr").lastElementChild;
            if (last !== e.closest("td") && getComputedStyle(last).position === "sticky") {
                right = Math.min(right, last.getBoundingClientRect().left);
            }
        }
        right = Math.min(right, document.documentElement.clientWidth);
        const s = getComputedStyle(e);
        pen.font = `${s.fontStyle} ${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
        out.push({
            text: e.textContent, title: e.title, width: r.width, seen: Math.max(0, right - left),
            whole: pen.measureText(e.textContent).width,
            least: pen.measureText("x".repeat(chars)).width,
        });
    }
    return out;
}"""


def test_an_error_shows_a_readable_start_and_the_whole_line_on_hover(
    browser: Browser, site: str
) -> None:
    """At 1400 px the executions' Last error column was cut to ``ConnectionErro`` by the
    Actions column kept in view, with nothing to read the rest by: each error's first line
    has its box at least 16 characters wide (ConnectionError:), the line whole in its title,
    and at 1400 and 1920 px that much of it in the table's first view."""
    with _page(browser) as page:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            for path in ERROR_PAGES:
                page.goto(site + path)
                errors = page.evaluate(_ERRORS, 16)
                assert errors, (width, path)
                for e in errors:
                    where = (width, path, e)
                    assert e["text"].startswith("ConnectionError: could not connect"), where
                    assert e["title"] == e["text"], where
                    assert e["width"] >= min(e["whole"], e["least"]) - 0.5, where
                    if width > 800:
                        assert e["seen"] >= min(e["whole"], e["least"]) - 0.5, where


#: Each task kind's box: its place, and whether its table hides columns (its box scrolls).
_KINDS = """() => [...document.querySelectorAll("#tasks .kind")].map((k) => {
    const r = k.getBoundingClientRect();
    const box = k.querySelector(".scroll");
    return {
        name: k.querySelector("h3").textContent.trim(), top: r.top, bottom: r.bottom,
        width: r.width, room: k.parentElement.getBoundingClientRect().width,
        hides: box ? box.scrollWidth - box.clientWidth : 0,
    };
})"""


def test_the_task_kinds_share_the_width_by_what_they_hold(browser: Browser, site: str) -> None:
    """At 1400 px the one-time tasks' box hid its last columns beside a recurring box of
    short names with room to spare: a kind's table hides columns only in a box that has
    the whole width to itself."""
    with _page(browser) as page:
        for width in (*WIDTHS, 1000, 1200, 1600):
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(site + "/")
            kinds = page.evaluate(_KINDS)
            assert len(kinds) == 3, kinds
            for kind in kinds:
                if kind["hides"] > 0:
                    beside = [
                        k["name"]
                        for k in kinds
                        if k is not kind and k["top"] < kind["bottom"] and kind["top"] < k["bottom"]
                    ]
                    assert beside == [], (width, kind, beside)
                    assert kind["width"] >= kind["room"] - 1, (width, kind)


#: The pages with filters, and their time fields.
FILTER_PAGES = ("/executions", "/history", "/dead-letters", "/results")
#: Where the last time field and its "UTC" are.
_UTC = """() => {
    const field = document.querySelector("form.filters input[name=until]").getBoundingClientRect();
    const utc = document.querySelector("form.filters .utc").getBoundingClientRect();
    return {field: [field.left, field.top, field.right, field.bottom],
            utc: [utc.left, utc.top, utc.right, utc.bottom]};
}"""


def test_the_filters_keep_utc_beside_the_time_field(browser: Browser, site: str) -> None:
    """The filters wrapped a lone "UTC" onto a line of its own at some widths: at every
    width from 800 to 1920 px, 20 px apart, it stays on the line of the time field it
    belongs to, just right of it."""
    with _page(browser) as page:
        for path in FILTER_PAGES:
            page.goto(site + path)
            for width in range(800, 1921, 20):
                page.set_viewport_size({"width": width, "height": 900})
                at = page.evaluate(_UTC)
                field, utc = at["field"], at["utc"]
                middle = (utc[1] + utc[3]) / 2
                where = (path, width, at)
                assert field[1] <= middle <= field[3], where  # on the field's line
                assert field[2] <= utc[0] <= field[2] + 24, where  # just right of it


def _luminance(rgb: str) -> float:
    channels = [int(c) / 255 for c in re.findall(r"\d+", rgb)[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


#: The colour behind each visible form control: its own, or its nearest ancestor's.
_CONTROLS = """() => [...document.querySelectorAll("select, input, button, textarea")]
    .filter((e) => e.type !== "hidden" && e.checkVisibility())
    .map((e) => {
        let colour = "rgb(255, 255, 255)";
        for (let n = e; n; n = n.parentElement) {
            const c = getComputedStyle(n).backgroundColor;
            if (c !== "rgba(0, 0, 0, 0)") { colour = c; break; }
        }
        return {control: `${e.tagName.toLowerCase()}.${e.className}#${e.id}[${e.name}]`,
                background: colour};
    })"""


def test_form_controls_are_dark_in_the_dark_scheme(browser: Browser, site: str) -> None:
    """In the dark scheme the Activity's task <select> and its Show button kept the
    browser's own mid grey (rgb(107, 107, 107)) on the dark page: every form control's
    background is as dark as the page's panels (relative luminance below 0.05)."""
    with _page(browser, color_scheme="dark") as page:
        for path in ("/", *FILTER_PAGES):
            page.goto(site + path)
            controls = page.evaluate(_CONTROLS)
            assert len(controls) > 2, (path, controls)
            if path == "/":
                assert any("#activity-task" in c["control"] for c in controls), controls
            for c in controls:
                assert _luminance(c["background"]) < 0.05, (path, c)
