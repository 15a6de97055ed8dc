"""examples/worker_split: a web process that only schedules, a worker process that runs."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from tests.support.cli import ROOT, cli_env, run_from_root


def test_the_worker_runs_what_the_web_side_schedules(pg_url: str, tmp_path: Path) -> None:
    env = cli_env(DATABASE_URL=pg_url)
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sqla_scheduler",
                "worker",
                "examples.worker_split.tasks:scheduler",
            ],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        engine = create_engine(pg_url)
        try:
            web = run_from_root(
                [sys.executable, "-m", "examples.worker_split.web", "ada", "bob"], env=env
            )
            assert web.returncode == 0, web.stderr
            assert "signed up bob; welcome scheduled" in web.stdout

            def welcomed() -> list[str]:
                if not inspect(engine).has_table("welcomes"):
                    return []
                with engine.connect() as conn:
                    rows = conn.execute(text("SELECT username FROM welcomes ORDER BY 1"))
                    return [row[0] for row in rows]

            deadline = time.monotonic() + 30
            while welcomed() != ["ada", "bob"]:
                if worker.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"welcomes not sent: {welcomed()}\n{log_path.read_text()}")
                time.sleep(0.05)

            worker.send_signal(signal.SIGTERM)
            assert worker.wait(timeout=30) == 0, log_path.read_text()
            with engine.connect() as conn:
                left = conn.execute(text("SELECT count(*) FROM scheduled_tasks")).scalar()
            assert left == 0
        finally:
            engine.dispose()
            if worker.poll() is None:
                worker.kill()
                worker.wait(timeout=30)
