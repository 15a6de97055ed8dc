"""The ``bench/worker.py`` processes, seen from the benchmark: starting one, reading its
``READY``/``START``/``STOPPED`` lines and stderr, and stopping it (SIGTERM, then SIGKILL).

Every live worker is registered, so the benchmark's last cleanup can stop any a scenario
left behind (``stop_all``); on Linux each also gets SIGTERM if the benchmark dies.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from bench.results import ScenarioError

ROOT = Path(__file__).resolve().parent.parent
WORKER_SCRIPT = Path(__file__).resolve().parent / "worker.py"

_live_workers: list[Worker] = []


def _die_with_parent() -> None:
    """In the child: get SIGTERM if the benchmark dies, so no worker outlives it (Linux)."""
    with contextlib.suppress(Exception):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class Worker:
    """A ``bench/worker.py`` process and threads reading its output."""

    def __init__(
        self,
        url: str,
        name: str,
        handler: str,
        *,
        polling_interval: float,
        concurrency: int = 10,
        report_starts: bool = False,
        extra: Sequence[str] = (),
        script: Path = WORKER_SCRIPT,
    ) -> None:
        self.name = name
        argv = [
            sys.executable,
            str(script),
            "--url",
            url,
            "--handler",
            handler,
            "--name",
            name,
            "--concurrency",
            str(concurrency),
            "--polling-interval",
            str(polling_interval),
        ]
        if report_starts:
            argv.append("--report-starts")
        argv += extra
        self.ready = threading.Event()
        self.terminated = False
        self.stopped_cleanly = False
        self.starts: dict[str, float] = {}
        #: When each started execution was due (its ``execution_time``), by the same key.
        self.dues: dict[str, float] = {}
        self.starts_lock = threading.Lock()
        self.stderr: deque[str] = deque(maxlen=200)
        self.stderr_lines = 0
        # The package of this checkout, as the benchmark itself imports it: a script's
        # path starts at its own directory, which would leave the installed one to import.
        path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": path},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        _live_workers.append(self)
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.split()
            if not parts:
                continue
            if parts[0] == "START" and len(parts) == 4:
                with self.starts_lock:
                    self.starts.setdefault(parts[1], float(parts[2]))
                    self.dues.setdefault(parts[1], float(parts[3]))
            elif parts[0] == "READY":
                self.ready.set()
            elif parts[0] == "STOPPED":
                self.stopped_cleanly = True

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))
            self.stderr_lines += 1

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.05):
            if self.proc.poll() is not None:
                raise ScenarioError(
                    f"worker {self.name} exited with {self.proc.returncode} before READY:\n"
                    + "\n".join(list(self.stderr)[-20:])
                )
            if time.monotonic() > deadline:
                raise ScenarioError(f"worker {self.name} not READY after {timeout:.0f}s")

    def terminate(self) -> None:
        """Send SIGTERM once: a second one would kill a worker that is winding down."""
        if not self.terminated and self.proc.poll() is None:
            self.terminated = True
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, wait, SIGKILL if needed; return the exit status."""
        if self.proc.poll() is None:
            self.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.stderr.append(f"[bench] no exit {timeout:.0f}s after SIGTERM: SIGKILL")
                self.proc.kill()
                self.proc.wait(10)
        for thread in self._threads:
            thread.join(5)
        if self in _live_workers:
            _live_workers.remove(self)
        return self.proc.returncode


def stop_workers(workers: Sequence[Worker]) -> list[str]:
    """Stop ``workers`` at once (SIGTERM to all, then wait); return problems seen."""
    for worker in workers:
        worker.terminate()
    problems = []
    for worker in workers:
        status = worker.stop()
        if status != 0 or not worker.stopped_cleanly:
            problems.append(f"worker {worker.name} exit status {status}")
        if worker.stderr_lines:
            tail = " | ".join(list(worker.stderr)[-3:])
            problems.append(
                f"worker {worker.name} wrote {worker.stderr_lines} stderr line(s): {tail}"
            )
    return problems


def stop_all(timeout: float) -> None:
    """Stop every worker still running, whatever went wrong before."""
    for worker in list(_live_workers):
        with contextlib.suppress(Exception):
            worker.stop(timeout)
