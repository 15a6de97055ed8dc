"""A worker process's node, as ``health --name`` probes it: alive while the worker runs,
stale once it is killed with ``kill -9``, gone after a graceful stop."""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import pytest

from sqla_scheduler.nodes import Node, list_nodes
from tests.support.cli import one_error_line, run, run_all
from tests.support.workers import Workers, wait_until

#: The workers record themselves this often. Readers judge by the same interval, so a
#: node is stale 3 s after its last beat: a beat late by 2 s on a busy machine is not a death.
BEAT_MS = 1000
INTERVAL = ("--node-heartbeat-interval", f"{BEAT_MS}ms")


@pytest.mark.slow
def test_health_follows_a_worker_until_it_is_killed(workers: Workers, db_url: str) -> None:
    """Slow by nature: a killed worker's node is judged dead only once it has missed its
    heartbeats, which takes their intervals to pass."""
    killed = workers.start("killed", NODE_HEARTBEAT_MS=BEAT_MS)
    stopped = workers.start("stopped", NODE_HEARTBEAT_MS=BEAT_MS)
    workers.wait_started(killed, stopped)

    def node(name: str) -> Node | None:
        found = list_nodes(db_url, node_heartbeat_interval=timedelta(milliseconds=BEAT_MS))
        return next((n for n in found if n.name == name), None)

    seen = node("killed")
    assert seen is not None, workers.report()
    assert seen.alive
    assert (seen.pid, seen.concurrency, seen.running) == (killed.pid, 10, 0)
    alive = run("health", "--url", db_url, "--name", "killed", *INTERVAL)
    assert alive.returncode == 0, alive.stderr
    assert "scheduler 'killed' was last seen" in alive.stdout

    os.kill(killed.pid, signal.SIGKILL)
    assert killed.proc.wait(timeout=30) == -signal.SIGKILL
    workers.stop(stopped)  # SIGTERM: a graceful stop removes its row
    assert node("stopped") is None
    wait_until(
        lambda: not getattr(node("killed"), "alive", True),
        20,
        "the killed worker's node to turn stale",
        workers.report,
    )
    stale, gone = run_all(
        ("health", "--url", db_url, "--name", "killed", *INTERVAL),
        ("health", "--url", db_url, "--name", "stopped", *INTERVAL),
    )
    assert stale.returncode == 1
    assert "scheduler 'killed' was last seen" in one_error_line(stale.stderr)
    assert "more than 3 node_heartbeat_intervals of 1s" in stale.stderr
    assert gone.returncode == 1
    assert "no scheduler named 'stopped' is recorded" in one_error_line(gone.stderr)
