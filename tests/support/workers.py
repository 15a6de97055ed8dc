"""Worker processes for the tests that run several: start them, watch them, always reap
them; and the one-line reads of their database the tests make."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest
from sqlalchemy import Engine, text

__all__ = ["ROOT", "Worker", "Workers", "rows", "scalar", "wait_until", "worker_command"]

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.concurrency.app:scheduler"


def worker_command(*args: str) -> list[str]:
    """``python -m sqla_scheduler worker ...`` with this interpreter."""
    return [sys.executable, "-m", "sqla_scheduler", "worker", *args]


def wait_until(
    condition: Callable[[], bool],
    deadline: float,
    what: str,
    report: Callable[[], str] = lambda: "",
) -> float:
    """Poll ``condition`` until it holds and return the seconds it took; fail at ``deadline``."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > deadline:
            pytest.fail(f"timed out after {deadline}s waiting for {what}\n{report()}")
        time.sleep(0.02)
    return time.monotonic() - start


class Worker:
    """One ``sqla-scheduler worker`` process; its stderr goes to ``log``."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], log: Path, out: IO[bytes]):
        self.name = name
        self.proc = proc
        self.log = log
        self._out = out

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def started(self) -> bool:
        if self.proc.poll() is not None:
            pytest.fail(f"worker {self.name} exited with {self.proc.returncode}\n{self.output()}")
        return f"scheduler {self.name!r} started" in self.output()

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self._out.close()


class Workers:
    """Starts workers against one database; the fixture kills whatever is left."""

    def __init__(self, url: str, directory: Path) -> None:
        self.url = url
        self.directory = directory
        self.all: list[Worker] = []

    def start(self, name: str, *args: str, **env: Any) -> Worker:
        environ = {
            **os.environ,
            "DATABASE_URL": self.url,
            "WORKER_NAME": name,
            "PYTHONUNBUFFERED": "1",
            "PARENT_PID": str(os.getpid()),  # no orphans if the test run is killed
            **{key: str(value) for key, value in env.items()},
        }
        log = self.directory / f"{name}.log"
        out = log.open("wb")
        proc = subprocess.Popen(
            worker_command(APP, *args),
            cwd=ROOT,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        worker = Worker(name, proc, log, out)
        self.all.append(worker)
        return worker

    def wait_started(self, *workers: Worker, deadline: float = 30) -> None:
        wait_until(
            lambda: all(w.started() for w in workers),
            deadline,
            "the workers to start",
            self.report,
        )

    def stop(self, *workers: Worker) -> None:
        """SIGTERM each worker, then require that each stopped gracefully (exit 0)."""
        for worker in workers:
            worker.signal(signal.SIGTERM)
        for worker in workers:
            assert worker.proc.wait(timeout=30) == 0, self.report()

    def report(self) -> str:
        return "\n".join(
            f"--- {w.name} (pid {w.pid}, exit {w.proc.poll()}) ---\n{w.output()[-4000:]}"
            for w in self.all
        )

    def close(self) -> None:
        for worker in self.all:
            worker.close()


def scalar(engine: Engine, sql: str, **params: Any) -> Any:
    with engine.connect() as conn:
        return conn.scalar(text(sql), params)


def rows(engine: Engine, sql: str, **params: Any) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(text(sql), params).all())
