"""What the fault tests share: the app's ``fault`` task scheduled, workers killed over and
over, and the check of what the ``runs`` table says after."""

from __future__ import annotations

import os
import random
import signal
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Engine

from tests.concurrency.app import build_scheduler, engine_of, one_time_task
from tests.support.workers import Worker, Workers, rows, scalar

__all__ = ["FAST", "SOAK", "check_fault_runs", "kill_repeatedly", "remaining", "schedule"]

#: Dead after 6 missed heartbeats of 250 ms: revived within about two seconds of a kill.
#: Not shorter: with the suite running in parallel on two cores, a live worker can be
#: kept off the CPU for over half a second, and its executions would be revived while
#: they run (a window of 600 ms made the kill tests flaky under that load).
FAST = {"HEARTBEAT_MS": 250, "MISSED_LIMIT": 6, "POLL_MS": 100}

#: ``SQLA_SCHEDULER_SOAK=1``: the fault tests run longer than the suite can afford (more
#: executions killed for longer, more generated runs of the state machine).
SOAK = os.environ.get("SQLA_SCHEDULER_SOAK") == "1"


def schedule(url: str, app_db: Engine, task: str, ids: Iterable[str], **kwargs: Any) -> int:
    """Schedule ``task`` instances ``ids`` (due now) from a client scheduler."""
    client = build_scheduler(url, name="client")
    try:
        definition = one_time_task(client, task)
        return client.schedule_batch(app_db, [definition.instance(i, **kwargs) for i in ids])
    finally:
        engine_of(client).dispose()


def kill_repeatedly(
    workers: Workers,
    live: list[Worker],
    app_db: Engine,
    *,
    seconds: float,
    pause: tuple[float, float],
    seed: int,
    **env: Any,
) -> set[int]:
    """Until the queue is empty or ``seconds`` pass: every ``pause`` seconds (a random
    span), SIGKILL a random worker of ``live`` and start another in its place with ``env``.
    Returns the killed pids; ``live`` holds the workers running at the end."""
    rng = random.Random(seed)
    killed: set[int] = set()
    started = time.monotonic()
    while remaining(app_db) and time.monotonic() - started < seconds:
        time.sleep(rng.uniform(*pause))
        slot = rng.randrange(len(live))
        victim = live[slot]
        os.kill(victim.pid, signal.SIGKILL)
        assert victim.proc.wait(timeout=30) == -signal.SIGKILL
        killed.add(victim.pid)
        live[slot] = workers.start(f"w{slot}-{len(killed)}", **env)
    return killed


def remaining(app_db: Engine) -> int:
    return int(scalar(app_db, "select count(*) from scheduled_tasks"))


def check_fault_runs(
    app_db: Engine, expected: set[str], killed: set[int], *, allow_reruns: bool = False
) -> dict[str, int]:
    """Every ``fault`` execution finished; unless ``allow_reruns``, every run but an
    execution's last began in a process that was killed afterwards (it was in flight at
    the kill). Returns counts."""
    history: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for instance, pid, phase in rows(
        app_db, "select instance, pid, phase from runs where task = 'fault' order by id"
    ):
        history[instance].append((pid, phase))
    finished = {i for i, runs in history.items() if any(p == "finished" for _, p in runs)}
    assert finished == expected, f"never finished: {sorted(expected - finished)[:20]}"
    reruns = 0
    for instance, runs in history.items():
        starts = [pid for pid, phase in runs if phase == "started"]
        reruns += len(starts) - 1
        for pid in [] if allow_reruns else starts[:-1]:
            assert pid in killed, f"{instance} ran again after a run by live pid {pid}: {runs}"
    return {"executions": len(expected), "reruns": reruns, "starts": reruns + len(expected)}
