"""Waiting in a test for what another task, thread or process does."""

from __future__ import annotations

from collections.abc import Callable

import anyio

__all__ = ["wait_for"]


async def wait_for(condition: Callable[[], bool], deadline: float = 20) -> None:
    """Poll ``condition`` until it holds; fail after ``deadline`` seconds."""
    with anyio.fail_after(deadline):
        while not condition():  # noqa: ASYNC110 - the condition is a database query
            await anyio.sleep(0.01)
