"""Plain HTTP GETs on the loopback interface, for the tests of the probe servers, and a
worker run as Kubernetes would, for the docs' manifests."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["get", "probed_worker"]


def get(port: int, path: str, *, timeout: float = 10) -> tuple[int, str]:
    """The status and the body of a GET of ``path`` on ``127.0.0.1:port``, an error status
    as well as a success; a connection refused or timed out raises ``OSError``."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def probed_worker(
    args: Sequence[str], port: int, paths: Iterable[str], env: Mapping[str, str]
) -> str:
    """Run ``python -m sqla_scheduler ARGS`` (a worker whose probes listen on ``port``) in
    ``env``, wait for each of ``paths`` to answer 200 (30 s each; the worker must not end
    meanwhile), then stop it with SIGTERM, as Kubernetes would. Its output, once it has
    exited 0."""
    worker = subprocess.Popen(
        [sys.executable, "-m", "sqla_scheduler", *args],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        for path in paths:
            deadline = time.monotonic() + 30
            while not _answers(port, path):
                assert worker.poll() is None, worker.communicate()[0]
                assert time.monotonic() < deadline, f"{path}: no answer on {port}"
                time.sleep(0.05)
    finally:
        worker.send_signal(signal.SIGTERM)
        output = worker.communicate(timeout=30)[0].decode()
    assert worker.returncode == 0, output
    return output


def _answers(port: int, path: str) -> bool:
    try:
        return get(port, path)[0] == 200
    except OSError:  # not listening yet
        return False
