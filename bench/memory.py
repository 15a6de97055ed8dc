"""Memory per running execution: the resident set of one ``bench/worker.py`` process
(``--hold``: each ``noop`` execution waits, once begun, for the worker's SIGUSR1) with
``memory_async`` (1,000) ``async def`` executions waiting at once on an ``AsyncEngine``
(``concurrency`` 1,000), then with ``memory_sync`` (100) plain ``def`` ones waiting in
their threads on an ``Engine`` (``concurrency`` 100).

A warm-up round of ``WARM_UP`` held executions runs first (scheduled, all begun,
released, drained), so that the code paths and the pool's first connections are in the
baseline; then the resident set (``VmRSS``) is read, the measured executions are
scheduled in one batch, and once every one has begun (its ``START`` line read) and its row
is marked picked, the resident set is read again. Per execution: the difference over the
count. They are then released and drained. The target (issue 35): at most 20 KB (20,000
bytes) per async execution.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from bench.harness import Bench
from bench.results import Figure, ScenarioError
from bench.soak import rss_kib
from bench.workers import Worker, stop_workers
from sqla_scheduler import Scheduler

__all__ = ["memory"]

WARM_UP = 10
#: What one async execution may cost, in bytes (issue 35: 20 KB).
ASYNC_TARGET = 20_000
#: How long a round may take to begin or to drain, seconds.
DEADLINE = 60.0


def memory(bench: Bench, handler: str) -> Figure:
    """The resident set per running execution of ``handler`` (``async`` or ``sync``)."""
    n = bench.counts.memory_async if handler == "async" else bench.counts.memory_sync
    key = f"memory_{handler}"
    label = f"RSS per running execution, {n:,} {handler} at once"
    db = bench.new_db(key)
    worker = Worker(
        bench.url(db, use_async=handler == "async"),
        f"{key}-w0",
        handler,
        polling_interval=bench.polling_interval,
        concurrency=n,
        report_starts=True,
        extra=["--hold"],
    )
    engine = bench.engine(db)
    try:
        worker.wait_ready(60)
        pid = worker.proc.pid
        ready = rss_kib(pid)
        client = Scheduler(engine, [bench.task])
        with bench.connect(db, autocommit=True) as poll:
            _round(bench, client, engine, poll, worker, "w", WARM_UP)
            base = rss_kib(pid)
            picked = _round(bench, client, engine, poll, worker, "d", n, measure=True)
            running = rss_kib(pid)
            os.kill(pid, signal.SIGUSR1)
            _wait(lambda: bench.count(poll) == 0, f"{key}: the released executions to finish")
            after = rss_kib(pid)
    finally:
        problems = stop_workers([worker])
        engine.dispose()
        bench.problems.extend(f"{label}: {p}" for p in problems)
    per = (running - base) * 1024 / n
    target = ASYNC_TARGET if handler == "async" else None
    return bench.add(
        Figure(
            key,
            label,
            per,
            "bytes",
            target="" if target is None else f"<= {target:,} bytes",
            met=None if target is None else per <= target,
            notes=(
                f"RSS {base:,} KiB before ({ready:,} at READY, then {WARM_UP} executions"
                f" run), {running:,} KiB with {n:,} running ({picked:,} rows picked),"
                f" {after:,} KiB once they finished"
            ),
            extra={"rss_kib": {"ready": ready, "base": base, "running": running, "after": after}},
        )
    )


def _round(
    bench: Bench,
    client: Scheduler,
    engine: Any,
    poll: Any,
    worker: Worker,
    prefix: str,
    n: int,
    *,
    measure: bool = False,
) -> int:
    """Schedule ``n`` held executions (instances ``<prefix>0000``...) and wait until each
    has begun and is picked; unless ``measure``, release them and wait until they are
    gone. Return how many rows were picked once all had begun."""
    keys = [f"{prefix}{i:04d}" for i in range(n)]
    inserted = client.schedule_batch(engine, [bench.task.instance(k) for k in keys])
    if inserted != n:
        raise ScenarioError(f"schedule_batch inserted {inserted} of {n}")

    def begun() -> bool:
        with worker.starts_lock:
            return sum(k in worker.starts for k in keys) == n

    _wait(begun, f"{n} held executions to begin")
    picked = _picked(poll)  # each begun execution holds its row until released
    if picked != n:
        raise ScenarioError(f"{picked} rows picked with {n} executions running")
    if not measure:
        os.kill(worker.proc.pid, signal.SIGUSR1)
        _wait(lambda: bench.count(poll) == 0, f"the {n} released executions to finish")
    return picked


def _picked(conn: Any) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM scheduled_tasks WHERE picked")
        row = cur.fetchone()
    assert row is not None
    return int(row[0])


def _wait(done: Callable[[], bool], what: str) -> None:
    """Poll ``done()`` until true, for at most ``DEADLINE`` seconds."""
    deadline = time.monotonic() + DEADLINE
    while not done():
        if time.monotonic() > deadline:
            raise ScenarioError(f"waited {DEADLINE:.0f}s for {what}")
        time.sleep(0.01)
