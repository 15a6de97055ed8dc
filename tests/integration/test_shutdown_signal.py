"""``ctx.shutdown.is_set`` answers both ways a Python user asks it: called, as
``threading.Event.is_set()`` is, and tested as it is (issue 29, a trap: calling it raised
``TypeError: 'bool' object is not callable``)."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest

from sqla_scheduler import ExecutionContext, ShutdownSignal, one_time
from tests.support import Harness, wait_for

pytestmark = pytest.mark.anyio

#: The two spellings: ``if ctx.shutdown.is_set():`` and ``if ctx.shutdown.is_set:``.
FORMS: dict[str, Callable[[ExecutionContext[Any]], bool]] = {
    "called": lambda ctx: bool(ctx.shutdown.is_set()),
    "tested": lambda ctx: True if ctx.shutdown.is_set else False,  # noqa: SIM210 - the form tested
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_handler_polls_the_shutdown_signal_either_way(
    sqlite: Harness, kind: str, form: str
) -> None:
    is_set = FORMS[form]
    seen: list[bool] = []
    started = threading.Event()

    def sync_handler(ctx: ExecutionContext[Any]) -> None:
        seen.append(is_set(ctx))
        started.set()
        deadline = time.monotonic() + 20
        while not is_set(ctx):  # what a long handler does between its steps
            assert time.monotonic() < deadline, "the signal never came"
            time.sleep(0.01)
        seen.append(is_set(ctx))

    async def async_handler(ctx: ExecutionContext[Any]) -> None:
        seen.append(is_set(ctx))
        started.set()
        with anyio.fail_after(20):
            while not is_set(ctx):  # noqa: ASYNC110 - polling the signal is the point
                await anyio.sleep(0.01)
        seen.append(is_set(ctx))

    task = one_time("long")(sync_handler if kind == "sync" else async_handler)
    scheduler = sqlite.scheduler([task], polling_interval=timedelta(milliseconds=50))
    await sqlite.resolve(scheduler.schedule(sqlite.engine, task.instance("l")))
    async with scheduler:
        await wait_for(started.is_set)
    assert seen == [False, True]
    assert sqlite.row("long", "l") is None, "the handler returned: a success"


def test_the_signal_is_a_bool_either_way() -> None:
    signal = ShutdownSignal()
    ctx = ExecutionContext(
        payload=None,
        task_name="t",
        instance_id="i",
        execution_time=datetime(2030, 1, 1, tzinfo=timezone.utc),
        shutdown=signal,
    )
    assert not signal.is_set
    assert signal.is_set() is False
    assert signal.is_set == False  # noqa: E712 - compared as the bool it stands for
    assert _shutting_down(ctx) is False  # read through a call: mypy narrows no property
    signal.set()
    assert signal.is_set
    assert signal.is_set() is True
    assert signal.is_set == True  # noqa: E712
    assert _shutting_down(ctx) is True
    assert repr(signal) == "ShutdownSignal(is_set=True)"


def _shutting_down(ctx: ExecutionContext[None]) -> bool:
    return ctx.shutting_down


def test_the_docs_spell_it_one_way() -> None:
    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *(root / "docs").rglob("*.md"), *(root / "examples").rglob("*")]
    other = re.compile(r"ctx\.shutting_down|shutdown\.is_set(?!\()")
    found = [
        f"{page.relative_to(root)}: {line.strip()}"
        for page in pages
        if page.is_file() and page.suffix in (".md", ".py") and page.name != "changelog.md"
        for line in page.read_text().splitlines()
        if other.search(line)
    ]
    assert found == [], "the docs write ctx.shutdown.is_set()"
