"""The admin page's layout in a real headless Chromium: at 800, 1400 and 1920 px every
action button can be reached and clicked (wide tables scroll inside their own box), no
text wraps in a box narrower than six of its characters and no name breaks inside a
word; the dark scheme's text is readable; the keyboard reaches the buttons, with a
visible focus; and the time zone toggle shows times in UTC or the browser's zone,
remembering the choice across pages.

Set ``SQLA_SCHEDULER_ADMIN_SCREENSHOTS=docs`` to keep the screenshots the admin page's
documentation shows (``admin-1400.png``, ``admin-800.png``, ``admin-dark.png``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import create_engine
from starlette.applications import Starlette
from starlette.routing import Mount

from sqla_scheduler.admin import create_app
from tests.admin._browser import MOUNT, Watch, live, mid_word_breaks, narrow_wraps, overflowing
from tests.support.admin import (
    PASSWORD,
    USER,
    make_scheduler,
    seed,
    seed_history,
    seed_nodes,
    send_email,
)
from tests.support.servers.pg_databases import DatabasePool
from tests.support.servers.postgres import PostgresCluster

pytestmark = pytest.mark.xdist_group("browser")

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

WIDTHS = (800, 1400, 1920)
#: The pages with action buttons: the overview, the executions of each state that has
#: some (running executions have none), the dead letters and a group's page.
ACTION_PAGES = (
    "/",
    "/executions",
    "/executions?state=scheduled",
    "/executions?state=due",
    "/executions?state=failing",
    "/executions?state=orphaned",
    "/dead-letters",
    "/groups",
)
#: What a user presses or opens: the action buttons and the delete confirmations.
CONTROLS = "main form.action button, main details.confirm > summary"


@pytest.fixture(scope="module")
def site(pg_cluster: PostgresCluster, pg_databases: DatabasePool) -> Iterator[tuple[str, int]]:
    """The admin page, actions on, of every kind of row, served on loopback; its base URL
    and the id of a group in progress. One database and server for the module: its tests
    read, and the keyboard's only changes (a retry, a requeue) change no layout."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    name, since = pg_databases.take()
    engine = create_engine(pg_cluster.url(name))
    seed(engine, now)
    seed_history(engine, now)
    seed_nodes(engine, now)
    scheduler = make_scheduler(engine, now)
    members = [send_email.instance(f"newsletter-{n}", {"n": n}) for n in range(3)]
    group = scheduler.schedule_group(engine, members, then=send_email.instance("newsletter"))
    scheduler.pause(engine, "nightly-report")
    app = create_app(scheduler, username=USER, password=PASSWORD, actions=True)
    try:
        with live(Starlette(routes=[Mount(MOUNT, app=app)])) as base:
            yield base + MOUNT, group.id
    finally:
        engine.dispose()
        pg_databases.give_back(name, since)


def _context(browser: Browser, **options: Any) -> BrowserContext:
    return browser.new_context(
        http_credentials={"username": USER, "password": PASSWORD},
        viewport={"width": 1400, "height": 900},
        **options,
    )


def _script_errors(watch: Watch) -> list[str]:
    """Console errors but the browser's request for a /favicon.ico the app does not have."""
    return [e for e in watch.errors if "status of 404" not in e]


def _unreachable(page: Page) -> list[str]:
    """Each control that cannot be clicked once scrolled to (in the page and in its table's
    box): outside the viewport or its box, or covered by something else."""
    return list(
        page.evaluate(
            """(selector) => {
                const out = [];
                for (const e of document.querySelectorAll(selector)) {
                    if (!e.checkVisibility()) continue;
                    e.scrollIntoView({block: "center", inline: "center"});
                    const r = e.getBoundingClientRect();
                    const row = e.closest("tr")?.innerText.slice(0, 40);
                    const name = `${e.textContent.trim()} in ${row}`;
                    if (r.width < 1 || r.height < 1) { out.push(`${name}: no size`); continue; }
                    const vw = document.documentElement.clientWidth;
                    const vh = document.documentElement.clientHeight;
                    if (r.left < 0 || r.top < 0 || r.right > vw + 0.5 || r.bottom > vh + 0.5) {
                        out.push(`${name}: outside the viewport ${JSON.stringify(r)}`);
                        continue;
                    }
                    const box = e.closest(".scroll");
                    if (box) {
                        const b = box.getBoundingClientRect();
                        if (r.left < b.left - 0.5 || r.right > b.right + 0.5) {
                            out.push(`${name}: outside its scroll box`);
                            continue;
                        }
                    }
                    const [x, y] = [(r.left + r.right) / 2, (r.top + r.bottom) / 2];
                    const hit = document.elementFromPoint(x, y);
                    if (!hit || !(hit === e || e.contains(hit))) {
                        out.push(`${name}: covered by ${hit?.tagName}.${hit?.className}`);
                    }
                }
                window.scrollTo(0, 0);
                return out;
            }""",
            CONTROLS,
        )
    )


def _squeezed(page: Page) -> list[str]:
    """Names in table cells wrapped onto more lines than their words need: a group's link
    and a badge always fit one line (a task name breaks at its hyphens: narrow_wraps and
    mid_word_breaks), an id at least eight characters to a line."""
    return list(
        page.evaluate(
            """() => {
                const out = [];
                for (const e of document.querySelectorAll("td a.group, td .badge")) {
                    if (e.getClientRects().length > 1 || e.getBoundingClientRect().height > 30) {
                        out.push(`${e.className} "${e.textContent}" wraps`);
                    }
                }
                for (const e of document.querySelectorAll("td .instance")) {
                    const text = e.textContent;
                    const perLine = parseFloat(getComputedStyle(e).fontSize) * 0.6 * 8;
                    if (text.length > 8 && e.getBoundingClientRect().width < perLine - 1) {
                        out.push(`instance "${text}" is ${e.getBoundingClientRect().width}px wide`);
                    }
                }
                return out;
            }"""
        )
    )


def test_every_action_is_reachable_at_each_width(
    browser: Browser, site: tuple[str, int], tmp_path: Path
) -> None:
    base, group_id = site
    context = _context(browser)
    page = context.new_page()
    watch = Watch(page)
    shots = os.environ.get("SQLA_SCHEDULER_ADMIN_SCREENSHOTS")
    try:
        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 900})
            for path in (*ACTION_PAGES, f"/groups/{group_id}"):
                page.goto(base + path)
                where = (width, path)
                assert page.locator("header.top").count() == 1, where
                controls = page.locator(CONTROLS)
                if path != "/groups":  # the listing of groups has no buttons, only links
                    assert controls.count() > 0, where
                assert overflowing(page) == [], (where, overflowing(page))
                assert _unreachable(page) == [], (where, _unreachable(page))
                assert _squeezed(page) == [], (where, _squeezed(page))
                assert narrow_wraps(page) == [], (where, narrow_wraps(page))
                assert mid_word_breaks(page) == [], (where, mid_word_breaks(page))
                if controls.count():
                    # Playwright's own checks (visible, stable, enabled, not covered), on the
                    # last control: the Actions column's far end.
                    controls.filter(visible=True).last.click(trial=True, timeout=2000)
            if width in (800, 1400):
                page.goto(base + "/executions")
                shot = Path(shots or tmp_path) / f"admin-{width}.png"
                page.screenshot(path=str(shot), full_page=True)
                assert shot.stat().st_size > 10_000
        # At 800 px the executions' table is wider than the window: it scrolls in its box,
        # with the keyboard too, and its last button is then in view.
        page.set_viewport_size({"width": 800, "height": 900})
        page.goto(base + "/executions")
        box = page.locator("div.scroll").first
        widths = box.evaluate("b => [b.scrollWidth, b.clientWidth]")
        assert widths[0] > widths[1], widths
        box.focus()
        at_end = "b => b.scrollLeft + b.clientWidth >= b.scrollWidth - 1"
        for _ in range(60):
            if box.evaluate(at_end):
                break
            page.keyboard.press("ArrowRight")
        else:
            pytest.fail(f"the arrow keys did not scroll the box to its end: {widths}")
        row = box.locator("tbody tr").first
        last = (
            row.locator("form.action button, details.confirm > summary").filter(visible=True).last
        )
        inside, edge = last.bounding_box(), box.bounding_box()
        assert inside is not None
        assert edge is not None
        assert edge["x"] <= inside["x"]
        assert inside["x"] + inside["width"] <= min(edge["x"] + edge["width"], 800)
        assert watch.dialogs == []
        assert _script_errors(watch) == []
    finally:
        context.close()


_CONTRAST = """(selectors) => {
    const channels = (text) => {
        const m = text.match(/rgba?\\(([^)]+)\\)/);
        const [r, g, b, a] = m[1].split(/[ ,\\/]+/).map(Number);
        return [r, g, b, a === undefined || Number.isNaN(a) ? 1 : a];
    };
    const over = (top, under) => top.slice(0, 3).map(
        (c, i) => c * top[3] + under[i] * (1 - top[3])).concat([1]);
    const background = (e) => {
        const layers = [];
        for (let n = e; n; n = n.parentElement) {
            const c = channels(getComputedStyle(n).backgroundColor);
            if (c[3] > 0) layers.push(c);
            if (c[3] >= 1) break;
        }
        let colour = [255, 255, 255, 1];
        if (layers.length && layers[layers.length - 1][3] >= 1) colour = layers.pop();
        else colour = channels(getComputedStyle(document.documentElement).backgroundColor);
        for (const layer of layers.reverse()) colour = over(layer, colour);
        return colour;
    };
    const luminance = (c) => {
        const [r, g, b] = c.slice(0, 3).map((v) => {
            v /= 255;
            return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
        });
        return 0.2126 * r + 0.7152 * g + 0.0722 * b;
    };
    const out = [];
    let checked = 0;
    for (const e of document.querySelectorAll(selectors)) {
        if (!e.checkVisibility()) continue;
        const own = [...e.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
        if (!own) continue;
        const style = getComputedStyle(e);
        const bg = background(e);
        const fg = over(channels(style.color), bg);
        const [hi, lo] = [luminance(fg), luminance(bg)].sort((a, b) => b - a);
        const ratio = (hi + 0.05) / (lo + 0.05);
        checked += 1;
        if (ratio < 4.5) {
            const text = e.textContent.trim().slice(0, 30);
            const under = bg.slice(0, 3).map(Math.round);
            out.push(`${e.tagName.toLowerCase()}.${e.className} "${text}": ${ratio.toFixed(2)}`
                + ` (${style.color} on rgb(${under}))`);
        }
    }
    return {checked, low: out.slice(0, 30)};
}"""

#: The text whose contrast is checked: body text, headings, table text, links, buttons,
#: badges, the header's, code and hints (a disabled page link, ``.off``, is left out).
TEXT = (
    "body, main p, main li, h1, h2, h3, th, td, td *, a, button, summary, .btn, .badge, "
    "label, input, select, code, small, .hint, .count, header.top *, footer, footer *, "
    "dt, dd, pre"
)


@pytest.mark.parametrize("scheme", ["dark", "light"])
def test_text_is_readable_in_each_scheme(
    browser: Browser, site: tuple[str, int], scheme: str, tmp_path: Path
) -> None:
    base, group_id = site
    context = _context(browser, color_scheme=scheme)
    page = context.new_page()
    try:
        for path in (
            *ACTION_PAGES,
            "/history",
            f"/groups/{group_id}",
            "/execution?task=send-email&instance=bounce-3",
        ):
            page.goto(base + path)
            body = page.evaluate("getComputedStyle(document.body).backgroundColor")
            level = sum(int(c) for c in re.findall(r"\d+", body)[:3]) / 3
            assert (level < 40) if scheme == "dark" else (level > 230), (path, body)
            found = page.evaluate(_CONTRAST, f":is({TEXT}):not(.off)")
            assert found["checked"] > 20, (path, found)
            assert found["low"] == [], (scheme, path, found["low"])
        if scheme == "dark":
            page.goto(base + "/")
            shots = os.environ.get("SQLA_SCHEDULER_ADMIN_SCREENSHOTS")
            shot = Path(shots or tmp_path) / "admin-dark.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
    finally:
        context.close()


def test_tab_reaches_the_action_buttons_with_a_visible_focus(
    browser: Browser, site: tuple[str, int]
) -> None:
    base, _ = site
    context = _context(browser)
    page = context.new_page()
    try:
        for path in ("/executions?state=failing", "/dead-letters"):
            page.goto(base + path)
            reached: list[str] = []
            for _ in range(80):
                page.keyboard.press("Tab")
                focused = page.evaluate(
                    """() => {
                        const e = document.activeElement;
                        const s = getComputedStyle(e);
                        return {
                            tag: e.tagName, action: e.dataset.action || null,
                            cls: e.className,
                            // a date-time field's focus is in its parts, inside it
                            visible: e.matches(":focus-visible") || (
                                e.type === "datetime-local" && e.matches(":focus-within")),
                            outline: [s.outlineStyle, parseFloat(s.outlineWidth)],
                        };
                    }"""
                )
                reached.append(f"{focused['tag']}.{focused['cls']}")
                # Everything focused shows it: links, the toggle, the form, the scroll box.
                assert focused["visible"], (path, focused)
                style, width = focused["outline"]
                assert style != "none", (path, focused)
                assert width >= 2, (path, focused)
                if focused["action"] in ("retry", "requeue"):
                    break
            else:
                pytest.fail(f"Tab never reached an action button on {path}: {reached}")
            assert any("scroll" in r for r in reached), reached  # the box is a stop too
            assert "BUTTON.tz-toggle" in reached
            # Enter on the focused button posts its form: the action is done.
            page.keyboard.press("Enter")
            page.locator("p.notice").wait_for(timeout=5000)
            assert page.locator("p.notice").inner_text().startswith("Done: the execution was")
    finally:
        context.close()


def _expected(iso: str, zone: str) -> str:
    value = datetime.fromisoformat(iso).astimezone(ZoneInfo(zone))
    return value.strftime("%Y-%m-%d %H:%M:%S")


def test_the_time_zone_toggle_switches_every_time_and_is_remembered(
    browser: Browser, site: tuple[str, int]
) -> None:
    base, _ = site
    context = _context(browser, timezone_id="Asia/Kolkata")
    page = context.new_page()
    watch = Watch(page)

    def shown() -> list[tuple[str, str]]:
        return [
            (t.get_attribute("datetime") or "", t.inner_text()) for t in page.locator("time").all()
        ]

    try:
        page.goto(base + "/")
        toggle = page.locator("header button.tz-toggle")
        assert toggle.get_attribute("aria-pressed") == "false"
        assert toggle.inner_text() == "times: UTC"
        times = shown()
        assert len(times) > 20
        for iso, text in times:
            assert text == _expected(iso, "UTC") + " UTC", (iso, text)

        toggle.click()
        assert toggle.get_attribute("aria-pressed") == "true"
        # Chromium's ICU may name the zone by its older name.
        zone = toggle.inner_text().removeprefix("times: ")
        assert zone in ("Asia/Kolkata", "Asia/Calcutta"), zone
        for iso, text in shown():
            assert text == _expected(iso, "Asia/Kolkata") + " GMT+5:30", (iso, text)
        assert page.locator("footer .tz-name").inner_text() == zone

        # Remembered on the other pages, and across a reload.
        for path in ("/executions", "/dead-letters", "/groups", "/"):
            page.goto(base + path)
            assert toggle.get_attribute("aria-pressed") == "true", path
            for iso, text in shown():
                assert text.endswith(" GMT+5:30"), (path, text)
                assert text.startswith(_expected(iso, "Asia/Kolkata")), (path, text)

        # Back to UTC, with the keyboard this time; remembered too.
        toggle.focus()
        page.keyboard.press("Enter")
        assert toggle.get_attribute("aria-pressed") == "false"
        page.goto(base + "/executions")
        assert toggle.get_attribute("aria-pressed") == "false"
        for iso, text in shown():
            assert text == _expected(iso, "UTC") + " UTC", (iso, text)
        assert _script_errors(watch) == []
    finally:
        context.close()

    # Without script the page still tells the time, in UTC, and offers no dead toggle.
    bare = _context(browser, timezone_id="Asia/Kolkata", java_script_enabled=False)
    page = bare.new_page()
    try:
        page.goto(base + "/")
        assert page.locator("button.tz-toggle").is_hidden()
        texts = page.locator("time").all_inner_texts()
        assert texts
        assert all(t.endswith(" UTC") for t in texts), texts
    finally:
        bare.close()
