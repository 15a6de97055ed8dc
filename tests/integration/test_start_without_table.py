"""A scheduler started on a database without its table fails at once, in one line.

Real processes, as an application would meet it: a FastAPI lifespan served by uvicorn,
``async with scheduler:`` in a plain script, and ``scheduler.start()`` in a sync one. Each
raises [`MissingTableError`][] itself (no exception group, no loop retrying forever), and
its message says to run the migrations.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.cli import ROOT, cli_env
from tests.support.servers.base import free_port

MESSAGE = "sqla_scheduler.exceptions.MissingTableError: the table 'scheduled_tasks' does not exist"
ADVICE = "run `sqla-scheduler db upgrade`"

APP = """
from sqlalchemy import create_engine
from sqla_scheduler import Scheduler, one_time

@one_time("greet")
def greet(ctx):
    pass

engine = create_engine({url!r})
scheduler = Scheduler(engine, tasks=[greet])
"""

SCRIPTS = {
    "fastapi-lifespan": """
from contextlib import asynccontextmanager
from fastapi import FastAPI

@asynccontextmanager
async def lifespan(app):
    async with scheduler:
        yield

app = FastAPI(lifespan=lifespan)
""",
    "async-with": """
import anyio

async def main():
    async with scheduler:
        raise AssertionError("the block ran without a table")

anyio.run(main)
""",
    "run": """
import anyio

anyio.run(scheduler.run)
""",
    "start": """
import threading
from sqla_scheduler import MissingTableError

try:
    scheduler.start()
except MissingTableError as exc:
    print(f"caught in {threading.current_thread().name}: {exc}")
    assert not scheduler.running
else:
    raise AssertionError("start() returned without a table")
""",
}


def _run(tmp_path: Path, kind: str) -> subprocess.CompletedProcess[str]:
    url = f"sqlite:///{tmp_path / 'not-migrated.db'}"
    module = tmp_path / "lifespan_app.py"
    module.write_text(textwrap.dedent(APP.format(url=url)) + textwrap.dedent(SCRIPTS[kind]))
    if kind == "fastapi-lifespan":
        args = [sys.executable, "-m", "uvicorn", "lifespan_app:app", "--port", str(free_port())]
    else:
        args = [sys.executable, str(module)]
    return subprocess.run(
        args,
        cwd=tmp_path,
        env=cli_env(PYTHONPATH=f"{tmp_path}:{ROOT}"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("kind", ["async-with", "run"])
def test_an_async_start_raises_the_one_error(tmp_path: Path, kind: str) -> None:
    done = _run(tmp_path, kind)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(MESSAGE), done.stderr
    assert ADVICE in last
    assert "ExceptionGroup" not in done.stderr
    assert "no such table" not in done.stderr  # nothing ran a statement on the missing table


def test_a_fastapi_lifespan_fails_in_one_line(tmp_path: Path) -> None:
    done = _run(tmp_path, "fastapi-lifespan")
    assert done.returncode != 0, done.stderr
    assert "Application startup failed" in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith(MESSAGE)]
    assert len(errors) == 1, done.stderr
    assert ADVICE in errors[0]
    assert "ExceptionGroup" not in done.stderr
    assert "no such table" not in done.stderr
    # the traceback is the lifespan's and the table check's, not every service's
    assert len(done.stderr.splitlines()) < 60, done.stderr


def test_start_raises_it_in_the_callers_thread(tmp_path: Path) -> None:
    done = _run(tmp_path, "start")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("caught in MainThread: the table 'scheduled_tasks'"), done.stdout
    assert ADVICE in done.stdout
    assert "no such table" not in done.stderr
