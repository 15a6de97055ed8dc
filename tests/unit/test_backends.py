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


def test_an_sqlite_without_returning_is_refused_by_version(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import sqlite3

    from sqla_scheduler._dialects import backend_for

    engine = create_engine("sqlite://")
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    with pytest.raises(NotImplementedError, match=r"needs SQLite 3\.35\.0 or newer.*is 3\.31\.1"):
        backend_for(engine.dialect)
