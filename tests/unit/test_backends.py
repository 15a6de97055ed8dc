"""Choosing the async library: a missing trio is named with the extra that installs it."""

from __future__ import annotations

import sys

import pytest
from sqlalchemy import create_engine

from sqla_scheduler import Scheduler


def test_start_on_trio_without_trio_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trio", None)  # `import trio` now fails
    scheduler = Scheduler(create_engine("sqlite://"), tasks=[])

    with pytest.raises(ImportError, match=r"pip install 'sqla-scheduler\[trio\]'"):
        scheduler.start(backend="trio")
    assert not scheduler.running
