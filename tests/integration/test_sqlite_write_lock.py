"""On SQLite a transactional handler holds the file's write lock for its whole run, and a
handler that is not transactional does not: what the transactional handlers guide and the
database chooser tell users (an application write fails "database is locked" after the
busy timeout while a long transactional handler runs; do the long work outside it).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from sqla_scheduler import ExecutionContext, ManualClock, Scheduler, one_time
from sqla_scheduler.testing import run_due
from tests.support import sqlite_file_url

DEADLINE = 20  # seconds, for what happens at once unless broken


@pytest.fixture
def path(sqlite_template: Path, tmp_path: Path) -> Path:
    path = Path(sqlite_file_url(sqlite_template, tmp_path).split("///", 1)[1])
    with sqlite3.connect(path) as conn:
        conn.execute("create table orders (id integer primary key)")
    return path


def app_write(path: Path, order_id: int) -> None:
    """The application's own write, with a busy timeout short enough for a test."""
    conn = sqlite3.connect(path, timeout=0.2)
    try:
        with conn:
            conn.execute("insert into orders (id) values (?)", (order_id,))
    finally:
        conn.close()


@pytest.fixture
def running(path: Path) -> Iterator[Any]:
    """``start(transactional)``: a handler of that kind running until the test returns."""
    started, release = threading.Event(), threading.Event()
    threads: list[threading.Thread] = []
    engine = create_engine(f"sqlite:///{path}")

    def start(transactional: bool) -> None:
        @one_time("long-work", transactional=transactional)
        def long_work(ctx: ExecutionContext[None]) -> None:
            started.set()
            assert release.wait(DEADLINE)

        scheduler = Scheduler(engine, [long_work], clock=ManualClock())
        scheduler.schedule(engine, long_work.instance("1"))
        thread = threading.Thread(target=run_due, args=(scheduler,))
        thread.start()
        threads.append(thread)
        assert started.wait(DEADLINE)

    try:
        yield start
    finally:
        release.set()
        for thread in threads:
            thread.join(DEADLINE)
        engine.dispose()


def test_a_running_transactional_handler_makes_other_writes_fail_locked(
    path: Path, running: Any
) -> None:
    running(True)
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        app_write(path, 1)


def test_a_running_handler_that_is_not_transactional_lets_other_writes_through(
    path: Path, running: Any
) -> None:
    running(False)
    app_write(path, 1)  # the workaround the docs give: long work outside the transaction
