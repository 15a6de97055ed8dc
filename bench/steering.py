"""What steering running work costs: the drain of a handler that reports its progress,
beside the same drain without reports, and how long a stop request takes to reach the
handler it stops.

- ``drain_progress``: ``progress_rows`` due executions of a handler that lasts
  ``BUSY_MS`` (20 ms, in two sleeps) and calls ``ctx.report_progress`` at the start of
  each, ``PROGRESS_RATE`` (100) times a second, drained by one async worker (concurrency
  10); beside the same drain of the same handler without the reports
  (``drain_progress_plain``, the row above it), in turn, each keeping its best of two
  rounds (``beside_plain``). A report costs no statement: the worker writes the latest
  of each execution at most once a second. Target >= 90% of the drain without reports.
- ``stop_async``, ``stop_sync``: one worker process (async handlers on an
  ``AsyncEngine``, sync ones on an ``Engine``; the default configuration but for the
  poll) runs ``stop_runs`` (50) executions that run until stopped, all at once; this
  process stops them one at a time with ``Scheduler.cancel`` on an engine of its own,
  and times from the moment its request's COMMIT was sent (so the commit itself is
  inside the figure; ``cancel`` returns a few ms later on a busy machine, after the
  NOTIFY may already have done its work) to the moment the handler saw the stop (an
  async handler at its cancellation, a sync one as ``ctx.cancelled`` is set;
  ``time.time()`` in both processes). The next stop waits for
  it, then ``latency_gap`` (20 ms) where a NOTIFY brings the request, or 20 to 520 ms
  elsewhere, so that the requests fall at every point of the worker's read of its stop
  requests, twice a second. Targets: p50 <= 20 ms on PostgreSQL; p99 <= 1 s everywhere
  (SPEC: within a second of the commit on every database).
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from functools import partial

from sqlalchemy import Connection, Engine, event

from bench.harness import TASK_NAME, Bench
from bench.results import Figure, ScenarioError
from bench.scenarios import _percentiles, beside_plain, drain
from bench.workers import Worker, stop_workers
from sqla_scheduler import Scheduler

#: How long each execution of ``drain_progress`` lasts, and how often it reports meanwhile.
BUSY_MS = 20
PROGRESS_RATE = 100
#: Where no NOTIFY brings a stop request, the worker reads its requests this often (s).
STOP_READ_INTERVAL = 0.5
#: How long a stop may take to reach its handler before the round gives up on it (s):
#: well past the second it should take, short of ``cancel_grace`` (30 s).
STOP_WAIT = 10.0


def drain_progress(bench: Bench) -> Figure:
    """The drain of a handler reporting progress ``PROGRESS_RATE`` times a second, beside
    the drain of the same handler without reports."""
    n = bench.counts.progress_rows
    busy = ["--busy-ms", str(BUSY_MS)]
    what = f"drain: 1 process, async, {n:,} rows of a {BUSY_MS} ms handler"
    plain = partial(
        drain,
        bench,
        "drain_progress_plain",
        f"{what}, no progress reports, beside the row below",
        "async",
        1,
        floor_key="",  # it is the floor
        extra=busy,
        rows=n,
    )
    measure = partial(
        drain,
        bench,
        "drain_progress",
        f"{what} reporting progress {PROGRESS_RATE} times a second",
        "async",
        1,
        floor_key="drain_progress_plain",
        extra=[*busy, "--progress-rate", str(PROGRESS_RATE)],
        rows=n,
    )
    return beside_plain(bench, "drain_progress", measure, plain)


def stop_latency(bench: Bench, handler: str) -> list[Figure]:
    """From each stop request's commit to its handler seeing the stop, for ``handler``
    (``async`` or ``sync``) handlers run by a worker process."""
    n = bench.counts.stop_runs
    name = f"stop_{handler}"
    db = bench.new_db(name)
    engine = bench.engine(db)
    worker = Worker(
        bench.url(db, use_async=handler == "async"),
        f"{name}-w0",
        handler,
        polling_interval=bench.polling_interval,
        concurrency=n + 5,  # every execution runs at once, until stopped
        report_starts=True,
        extra=["--until-stopped"],
    )
    committed: dict[str, float] = {}
    try:
        worker.wait_ready(60)
        client = Scheduler(engine, [bench.task])
        keys = [f"s{i:05d}" for i in range(n)]
        if client.schedule_batch(engine, [bench.task.instance(key) for key in keys]) != n:
            raise ScenarioError("schedule_batch inserted fewer than asked")
        if not _reported(worker, keys, bench.polling_interval + 40):
            raise ScenarioError(f"{name}: not all {n} executions started")
        committed = _stop_each(bench, client, engine, worker, keys)
    finally:
        problems = stop_workers([worker])
        engine.dispose()
        bench.problems.extend(f"{name}: {p}" for p in problems)
    with worker.starts_lock:
        seen = dict(worker.starts)
    delays = sorted(
        (seen[f"stopped@{key}"] - at) * 1000.0
        for key, at in committed.items()
        if f"stopped@{key}" in seen
    )
    if len(delays) < max(2, n // 2):
        raise ScenarioError(f"{name}: only {len(delays)} of {n} stops reached their handler")
    if len(delays) < n:
        bench.problems.append(f"{name}: {n - len(delays)} stops never reached their handler")
    targets = {50: 20.0, 99: 1000.0} if bench.server.notifies else {99: 1000.0}
    label = f"stop latency, {handler} handler (cancel's COMMIT sent to the handler's stop)"
    return _percentiles(bench, name, label, delays, targets, counted="stopped")


def _stop_each(
    bench: Bench, client: Scheduler, engine: Engine, worker: Worker, keys: Sequence[str]
) -> dict[str, float]:
    """``cancel`` each of ``keys`` in turn, each once the one before it reached its
    handler (or ``STOP_WAIT`` passed); return when each request's COMMIT was sent (epoch
    s: the last commit ``cancel`` made)."""
    rng = random.Random(37)  # the same gaps in every run
    sent: list[float] = []

    def committing(conn: Connection) -> None:
        sent.append(time.time())

    event.listen(engine, "commit", committing)
    committed: dict[str, float] = {}
    for key in keys:
        sent.clear()
        if not client.cancel(engine, TASK_NAME, key):
            raise ScenarioError(f"cancel of the running {key} returned False")
        if not sent:
            raise ScenarioError(f"cancel of {key} committed nothing")
        committed[key] = sent[-1]
        _reported(worker, [f"stopped@{key}"], STOP_WAIT)
        if bench.server.notifies:
            time.sleep(bench.counts.latency_gap)
        else:
            time.sleep(bench.counts.latency_gap + rng.uniform(0.0, STOP_READ_INTERVAL))
    return committed


def _reported(worker: Worker, keys: Sequence[str], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for ``worker`` to report each of ``keys``; whether
    it did."""
    deadline = time.monotonic() + timeout
    while True:
        with worker.starts_lock:
            if all(key in worker.starts for key in keys):
                return True
        if time.monotonic() > deadline or worker.proc.poll() is not None:
            return False
        time.sleep(0.005)
