"""What the admin's browser tests share: Debian's Chromium (installed once when missing),
a Playwright browser on it, the admin served by uvicorn on the loopback interface, and a
watch on what a page does (dialogs, console errors).

A module of browser tests imports ``browser`` and ``chromium`` (fixtures) from here, and
marks itself ``pytest.mark.xdist_group("browser")`` so that one pytest-xdist worker runs
every browser test.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.types import ASGIApp

from tests.support.admin import PASSWORD, USER
from tests.support.servers.base import free_port

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "MOUNT",
    "Watch",
    "browser",
    "chromium",
    "live",
    "mid_word_breaks",
    "narrow_wraps",
    "overflowing",
    "signed_in",
]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
_INSTALL_LOCK = Path("/tmp/sqla-scheduler-chromium-install.lock")
_INSTALL_TIMEOUT = 900
MOUNT = "/admin/jobs"


def _install_chromium() -> str | None:
    """Install Debian's chromium; return why it could not be, or ``None`` once it is there."""
    if CHROMIUM.exists():
        return None
    apt_get = shutil.which("apt-get")
    if apt_get is None or os.geteuid() != 0:
        return "Debian's chromium is missing and cannot be installed (needs root and apt-get)"
    deadline = time.monotonic() + _INSTALL_TIMEOUT
    with _INSTALL_LOCK.open("w") as lock:
        # One installer at a time (parallel test runs); the others wait for it, bounded.
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    return "timed out waiting for another chromium install to finish"
                time.sleep(1)
        if CHROMIUM.exists():
            return None
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in ([apt_get, "update"], [apt_get, "install", "-y", "chromium"]):
            try:
                done = subprocess.run(
                    command,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    text=True,
                    timeout=max(1.0, deadline - time.monotonic()),
                    check=False,
                )
            except subprocess.TimeoutExpired:
                return f"{' '.join(command)} timed out"
            if done.returncode != 0:
                tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
                return f"{' '.join(command)} failed: " + " / ".join(tail)
    return None if CHROMIUM.exists() else "apt-get installed chromium, but not at /usr/bin"


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's chromium, installed once per session when missing."""
    problem = _install_chromium()
    if problem is not None:
        pytest.skip(f"no browser: {problem}")
    return CHROMIUM


@pytest.fixture(scope="module")
def browser(chromium: Path) -> Iterator[Browser]:
    # Module scope: Playwright's sync API holds an event loop on the main thread while it
    # runs, which the async tests of other modules need free.
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="the playwright package is not installed"
    )
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        try:
            yield launched
        finally:
            launched.close()


@contextlib.contextmanager
def live(app: ASGIApp) -> Iterator[str]:
    """Serve ``app`` with uvicorn on 127.0.0.1 in a thread; yield its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    )
    thread = threading.Thread(target=server.run, name="admin-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "uvicorn stopped while starting"
        assert time.monotonic() < deadline, "uvicorn did not start within 10 s"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextlib.contextmanager
def signed_in(browser: Browser, app: ASGIApp, path: str) -> Iterator[tuple[str, Page]]:
    """The admin ``app`` served live at ``MOUNT``, and a page of ``browser`` signed in as
    the tests' user in a 1440x900 window, opened at ``path`` under it: the server's base
    URL and the page. Leaving without an error asserts that no page opened a dialog
    (injected script ran) nor broke the Content-Security-Policy; the page's context
    closes on leaving."""
    with live(Starlette(routes=[Mount(MOUNT, app=app)])) as base:
        context = browser.new_context(
            http_credentials={"username": USER, "password": PASSWORD},
            viewport={"width": 1440, "height": 900},
        )
        try:
            page = context.new_page()
            watch = Watch(page)
            page.goto(f"{base}{MOUNT}{path}")
            yield base, page
            assert watch.dialogs == [], "injected script ran"
            assert watch.csp_violations() == []
        finally:
            context.close()


class Watch:
    """Everything a page does that a test must see: dialogs (script ran) and console
    errors (a Content-Security-Policy violation is one)."""

    def __init__(self, page: Page) -> None:
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def csp_violations(self) -> list[str]:
        return [e for e in self.errors if "Content Security Policy" in e]


def overflowing(page: Page) -> list[str]:
    """What sticks out sideways: the page's own scroll width, a section or task kind that
    scrolls, and each element whose box ends beyond the viewport's right edge. What is
    inside a table's scroll box (``.scroll``) is left to it: that box scrolls, and must not
    itself stick out."""
    return list(
        page.evaluate(
            """() => {
                const width = document.documentElement.clientWidth;
                const out = [];
                if (document.documentElement.scrollWidth > width) {
                    out.push(`page scrolls: ${document.documentElement.scrollWidth} > ${width}`);
                }
                for (const e of document.querySelectorAll("main, section, .kind")) {
                    if (e.scrollWidth > e.clientWidth) {
                        out.push(`${e.tagName.toLowerCase()}#${e.id}.${e.className} scrolls`);
                    }
                }
                for (const e of document.querySelectorAll("body *")) {
                    if (!e.checkVisibility()) continue;  // e.g. inside a closed <details>
                    if (e.parentElement.closest(".scroll")) continue;  // it scrolls there
                    const right = e.getBoundingClientRect().right;
                    if (right > width + 0.5) {
                        out.push(`${e.tagName.toLowerCase()}.${e.className} ends at ${right}`);
                    }
                }
                return out.slice(0, 40);
            }"""
        )
    )


#: Each text that wraps onto more than one line in a box narrower than ``chars`` of its
#: font's average characters (the lower-case alphabet's mean width, in the text's own
#: font). The box is the text's nearest ancestor that is not inline: what its lines fill.
_NARROW_WRAPS = """(chars) => {
    const sample = "abcdefghijklmnopqrstuvwxyz";
    const pen = document.createElement("canvas").getContext("2d");
    const out = [];
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        const text = n.textContent.trim();
        const e = n.parentElement;
        if (!text || !e.checkVisibility() || e.closest("svg, select, textarea")) continue;
        const range = document.createRange();
        range.selectNodeContents(n);
        const tops = [...range.getClientRects()].filter((r) => r.width > 0).map((r) => r.top);
        tops.sort((a, b) => a - b);
        let lines = tops.length ? 1 : 0;
        for (let i = 1; i < tops.length; i++) if (tops[i] - tops[i - 1] > 2) lines += 1;
        if (lines < 2) continue;
        let box = e;
        while (["inline", "contents"].includes(getComputedStyle(box).display)) {
            box = box.parentElement;
        }
        const s = getComputedStyle(box);
        const width = box.clientWidth - parseFloat(s.paddingLeft) - parseFloat(s.paddingRight);
        const own = getComputedStyle(e);
        pen.font = `${own.fontStyle} ${own.fontWeight} ${own.fontSize} ${own.fontFamily}`;
        const least = chars * pen.measureText(sample).width / sample.length;
        if (width < least - 0.5) {
            out.push(`${box.tagName.toLowerCase()}.${box.className} "${text.slice(0, 40)}":`
                + ` ${lines} lines in ${width.toFixed(0)}px < ${least.toFixed(0)}px`);
        }
    }
    return out.slice(0, 30);
}"""


def narrow_wraps(page: Page, chars: int = 6) -> list[str]:
    """Each visible text that wraps in a box narrower than ``chars`` average characters of
    its font: a column squeezed to a few letters a line."""
    return list(page.evaluate(_NARROW_WRAPS, chars))


#: Each line break inside a word of the texts under ``selector``: a break must follow white
#: space or a separator (- / _ . : , | +), or come before white space or "(".
_MID_WORD = r"""(selector) => {
    const out = [];
    for (const e of document.querySelectorAll(selector)) {
        if (!e.checkVisibility()) continue;
        const walk = document.createTreeWalker(e, NodeFilter.SHOW_TEXT);
        for (let n = walk.nextNode(); n; n = walk.nextNode()) {
            if (n.parentElement.closest(".instance")) continue;  // ids break anywhere
            const text = n.textContent;
            const range = document.createRange();
            let top = null;
            for (let i = 0; i < text.length; i++) {
                range.setStart(n, i);
                range.setEnd(n, i + 1);
                const rect = [...range.getClientRects()].find((r) => r.width > 0);
                if (!rect) continue;  // white space collapsed at a line's end
                if (top !== null && rect.top - top > 2) {
                    const before = text.slice(0, i).trimEnd().slice(-1);
                    const after = text[i];
                    if (!(/[\s\-\/_.:,|+]/.test(before) || text[i - 1].trim() === ""
                          || after === "(")) {
                        out.push(`"${text.trim().slice(0, 50)}" breaks at "${
                            text.slice(Math.max(0, i - 6), i)}|${text.slice(i, i + 6)}"`);
                    }
                }
                top = rect.top;
            }
        }
    }
    return out.slice(0, 30);
}"""


def mid_word_breaks(page: Page, selector: str = "td") -> list[str]:
    """Each line break inside a word of the visible texts under ``selector`` (instance ids,
    which may break anywhere, left out)."""
    return list(page.evaluate(_MID_WORD, selector))
