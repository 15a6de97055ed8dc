"""A worker process given SIGTERM exits within ``shutdown_max_wait`` plus the stop's grace
even when an async handler swallows its cancellation forever, naming it in its log; the
execution stays picked, for revival."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from sqla_scheduler import Scheduler
from tests.concurrency.stubborn_app import stubborn
from tests.support import sqlite_file_url
from tests.support.workers import ROOT, wait_until, worker_command

#: ``shutdown_max_wait`` of the app, and the stop's grace (``STOP_GRACE``, docs/loop.md).
BOUND = 0.3 + 2.0
MARGIN = 2.0


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_sigterm_stops_a_worker_whose_handler_ignores_cancellation(
    sqlite_template: Path, tmp_path: Path, backend: str
) -> None:
    """Slow (about 4 s): a real process must start, and its stop takes the whole grace
    that only a handler ignoring its cancellation uses; only a real process shows that its
    event loop, waiting for that handler, does not keep it from exiting."""
    url = sqlite_file_url(sqlite_template, tmp_path)
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            worker_command("tests.concurrency.stubborn_app:scheduler", "--backend", backend),
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": url, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        engine = create_engine(url)
        try:
            Scheduler(engine, [stubborn]).schedule(engine, stubborn.instance("s-1"))
            wait_until(lambda: "stubborn started" in log.read_text(), 20, "the handler to start")
            stopping = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            try:
                status = proc.wait(timeout=BOUND + MARGIN)
            except subprocess.TimeoutExpired:
                status = None
            took = time.monotonic() - stopping
            output = log.read_text()
            assert status == 0, (took, output)
            assert "left running" in output, output
            assert "stubborn/s-1" in output, output
            with engine.connect() as conn:
                picked = conn.exec_driver_sql("select picked from scheduled_tasks").scalar()
            assert picked, "left to revival"
        finally:
            engine.dispose()
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
