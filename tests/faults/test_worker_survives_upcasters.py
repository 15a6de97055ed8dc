"""Under ``sqla-scheduler worker``, an upcaster's ``SystemExit(0)`` makes its row
undecodable: the process goes on running the queue, and only a signal stops it (issue 29,
defect 2, in a real process: the worker used to exit, its row left picked, and kill the
next process that picked it after revival)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from sqlalchemy import create_engine

from sqla_scheduler import Scheduler, configure_sqlite, one_time
from tests.support import sqlite_file_url
from tests.support.workers import ROOT, wait_until, worker_command


def test_an_upcasters_system_exit_does_not_end_the_worker(
    sqlite_template: Path, tmp_path: Path
) -> None:
    url = sqlite_file_url(sqlite_template, tmp_path)
    runs = tmp_path / "runs.txt"
    runs.touch()
    log = tmp_path / "worker.log"
    engine = configure_sqlite(create_engine(url))
    client = Scheduler(engine)
    v1 = one_time("versioned")(lambda ctx: None)  # what the previous deploy wrote
    ids = ["exit", *(f"ok-{i}" for i in range(6))]
    client.schedule_batch(
        engine, [v1.instance(i, {"exit": True} if i == "exit" else {}) for i in ids]
    )
    with log.open("wb") as out:
        proc = subprocess.Popen(
            worker_command("tests.faults.upcaster_app:scheduler"),
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": url, "RUNS_FILE": str(runs), "WORKER_NAME": "w0"},
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:

            def report() -> str:
                return f"exit {proc.poll()}\n{log.read_text(errors='replace')[-4000:]}"

            def done() -> bool:
                assert proc.poll() is None, report()
                return len(runs.read_text().split()) == 6 and not client.executions(engine)

            wait_until(done, 60, "the good executions to run", report)
            assert sorted(runs.read_text().split()) == ids[1:]
            (entry,) = client.history(engine, task_name="versioned")
            assert (entry.outcome, entry.instance_id, entry.data) == (
                "undecodable",
                "exit",
                {"exit": True},
            )
            assert "upcasters[1] raised SystemExit" in (entry.error or "")
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0, report()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            engine.dispose()
    assert "took versioned/exit out of the table" in log.read_text()
