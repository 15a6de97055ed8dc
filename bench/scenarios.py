"""The library's scenarios: due executions drained by ``bench/worker.py`` processes,
commit-to-start latency and due-time lag of an idle worker, and ``Scheduler.schedule``
and ``Scheduler.schedule_batch`` timed on a fresh database each.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from pathlib import Path

from psycopg.types.json import Jsonb
from sqlalchemy import Engine

from bench.harness import INSERT_SQL, TASK_NAME, Bench, utc_now
from bench.raw_listener import CHANNEL as RAW_CHANNEL
from bench.results import Figure, ScenarioError
from bench.workers import WORKER_SCRIPT, Worker, stop_workers
from sqla_scheduler import Scheduler

RAW_LISTENER = Path(__file__).resolve().parent / "raw_listener.py"

# --- drain by worker processes -----------------------------------------------------------


def drain(
    bench: Bench,
    key: str,
    label: str,
    handler: str,
    processes: int,
    *,
    db: str | None = None,
    floor_key: str = "floor_drain",
    extra: Sequence[str] = (),
    rows: int | None = None,
) -> Figure:
    """``drain_rows`` (or ``rows``) due executions scheduled at once, drained by
    ``processes`` workers;
    on a fresh database, or on ``db`` (which may hold other rows: only the due rows of the
    bench's task are counted)."""
    n = rows or bench.counts.drain_rows
    db = db or bench.new_db(key)
    url = bench.cluster.url(db)
    workers: list[Worker] = []
    engine = bench.engine(db)
    problems: list[str] = []
    try:
        for i in range(processes):
            workers.append(
                Worker(
                    url,
                    f"{key}-w{i}",
                    handler,
                    polling_interval=bench.polling_interval,
                    extra=extra,
                )
            )
        for worker in workers:
            worker.wait_ready(60)
        client = Scheduler(engine, [bench.task])
        instances = [bench.task.instance(f"d{i:07d}") for i in range(n)]
        with engine.connect():
            pass  # open the pool's connection before the clock starts
        with bench.connect(db, autocommit=True) as poll:
            inserted = client.schedule_batch(engine, instances)
            t0 = time.perf_counter()
            if inserted != n:
                raise ScenarioError(f"schedule_batch inserted {inserted} of {n}")
            t_first: float | None = None
            last_left, last_progress = n, t0
            stall = 2 * bench.polling_interval + 10
            while True:
                left = bench.count_due(poll)
                now = time.perf_counter()
                if left < n and t_first is None:
                    t_first = now
                if left == 0:
                    t1 = now
                    break
                if left < last_left:
                    last_left, last_progress = left, now
                elif now - last_progress > stall:
                    dead = [w.name for w in workers if w.proc.poll() is not None]
                    raise ScenarioError(
                        f"no progress for {stall:.0f}s: {left:,} of {n:,} rows left"
                        f" after {now - t0:.1f}s; exited workers: {dead or 'none'}"
                    )
                if now - t0 > 300:
                    raise ScenarioError(f"{left:,} of {n:,} rows left after 300s")
                time.sleep(0.01)
    finally:
        problems = stop_workers(workers)
        engine.dispose()
        bench.problems.extend(f"{label}: {p}" for p in problems)
    bench.read_table_stats(db, label, n)
    elapsed = t1 - t0
    assert t_first is not None
    steady = n / (t1 - t_first) if t1 > t_first else float("nan")
    return bench.add(
        Figure(
            key,
            label,
            n / elapsed,
            "rows/s",
            floor_key=floor_key,
            notes=(
                f"{n:,} rows in {elapsed:.2f}s; first row gone after "
                f"{t_first - t0:.2f}s; {steady:,.0f} rows/s from then"
            ),
            extra={"elapsed_s": elapsed, "first_done_s": t_first - t0, "steady": steady},
        )
    )


# --- commit-to-start latency and due-time lag -------------------------------------------


def _starts_after(
    bench: Bench,
    name: str,
    schedule: Callable[[Scheduler, Engine], dict[str, float]],
    *,
    extra: Sequence[str] = (),
    measured: Callable[[str], bool] = lambda key: True,
    count: int = 0,
    script: Path = WORKER_SCRIPT,
) -> list[float]:
    """Run one idle async worker (the default configuration but for ``--polling-interval``
    and ``extra`` arguments) and let ``schedule`` schedule from this process; return the
    delay of each start, in ms.

    ``schedule`` returns when each execution should start (epoch seconds, by the worker's
    key for it), and the worker runs until each has started. If it returns nothing, the
    starts whose keys are ``measured`` count, from when each was due (as the worker
    reports), and the worker runs until ``count`` of them have started. ``script`` is
    the worker's program (the raw floor's ``bench/raw_listener.py`` speaks its protocol).
    """
    db = bench.new_db(name)
    engine = bench.engine(db)
    worker = Worker(
        bench.cluster.url(db),
        f"{name}-w0",
        "async",
        polling_interval=bench.polling_interval,
        report_starts=True,
        extra=extra,
        script=script,
    )
    marks: dict[str, float] = {}
    try:
        worker.wait_ready(60)
        client = Scheduler(engine, [bench.task])
        with engine.connect():
            pass
        time.sleep(0.5)  # let the worker's first (empty) poll finish
        marks = schedule(client, engine)
        wanted = len(marks) or count
        deadline = time.monotonic() + bench.polling_interval + 40
        while time.monotonic() < deadline:
            with worker.starts_lock:
                keys = marks.keys() if marks else filter(measured, worker.starts)
                if sum(k in worker.starts for k in keys) >= wanted:
                    break
            time.sleep(0.02)
    finally:
        problems = stop_workers([worker])
        engine.dispose()
        bench.problems.extend(f"{name}: {p}" for p in problems)
    with worker.starts_lock:
        starts = dict(worker.starts)
        marks = marks or {k: due for k, due in worker.dues.items() if measured(k)}
    delays = sorted((starts[k] - marks[k]) * 1000.0 for k in marks if k in starts)
    if len(delays) < 2:
        raise ScenarioError(f"only {len(delays)} of {len(marks)} executions started")
    if len(delays) < len(marks):
        bench.problems.append(f"{name}: {len(marks) - len(delays)} executions never started")
    return delays


def _percentiles(
    bench: Bench, key: str, label: str, delays: list[float], targets: dict[int, float]
) -> list[Figure]:
    """p50, p95 and p99 of ``delays`` (ms) as figures ``<key>_p50`` and so on, each held to
    its target in ``targets`` (by percentile) where there is one."""
    q = statistics.quantiles(delays, n=100, method="inclusive")
    note = f"{len(delays)} started; min {delays[0]:.2f} ms, max {delays[-1]:.2f} ms"
    figures = []
    for pct in (50, 95, 99):
        value, limit = q[pct - 1], targets.get(pct)
        figure = Figure(
            f"{key}_p{pct}",
            f"{label} p{pct}",
            value,
            "ms",
            target="" if limit is None else f"<= {limit:g} ms",
            met=None if limit is None else value <= limit,
            notes=note if pct == 50 else "",
            extra={"samples": len(delays)},
        )
        figures.append(bench.add(figure))
    return figures


def _paced(bench: Bench, commit: Callable[[str], None]) -> dict[str, float]:
    """``commit`` the instances ``l00000``, ``l00001``... one at a time, one every
    ``latency_gap``; return when each commit returned (epoch seconds, by instance)."""
    n, gap = bench.counts.latency_runs, bench.counts.latency_gap
    commits: dict[str, float] = {}
    begin = time.perf_counter()
    for i in range(n):
        key = f"l{i:05d}"
        commit(key)
        commits[key] = time.time()
        pause = begin + (i + 1) * gap - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    return commits


def floor_latency(bench: Bench) -> list[Figure]:
    """The floor of commit-to-start latency, in the same run: a raw INSERT and NOTIFY per
    commit, heard by ``bench/raw_listener.py``, which picks in one raw UPDATE; from each
    commit to the pick's return."""

    def schedule(client: Scheduler, engine: Engine) -> dict[str, float]:
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None

            def commit(key: str) -> None:
                with raw.cursor() as cur:
                    cur.execute(INSERT_SQL, (TASK_NAME, key, Jsonb(None), utc_now(), 0))
                    cur.execute("SELECT pg_notify(%s, '')", (RAW_CHANNEL,))
                raw.commit()

            return _paced(bench, commit)

    delays = _starts_after(bench, "floor_latency", schedule, script=RAW_LISTENER)
    label = "raw commit-to-pick floor: INSERT + NOTIFY, LISTEN + UPDATE"
    return _percentiles(bench, "floor_latency", label, delays, {})


def latency(bench: Bench) -> list[Figure]:
    """From each commit to its execution's start, due executions scheduled one at a time."""

    def schedule(client: Scheduler, engine: Engine) -> dict[str, float]:
        def commit(key: str) -> None:
            if not client.schedule(engine, bench.task.instance(key)):
                raise ScenarioError(f"schedule of {key} inserted nothing")

        return _paced(bench, commit)

    delays = _starts_after(bench, "latency", schedule)
    return _percentiles(bench, "latency", "commit-to-start latency", delays, {50: 1.2, 99: 3.0})


def due_lag(bench: Bench) -> list[Figure]:
    """From each execution's time to its start: one-time executions scheduled 0.2-2 s
    ahead by another process, with the default 10 s poll."""
    n = bench.counts.latency_runs

    def schedule(client: Scheduler, engine: Engine) -> dict[str, float]:
        due: dict[str, float] = {}
        now = client.clock.now()
        batch = []
        for i in range(n):
            at = now + timedelta(seconds=0.2 + 1.8 * i / n)
            batch.append(bench.task.instance(f"d{i:05d}", at=at))
            due[f"d{i:05d}"] = at.timestamp()
        if client.schedule_batch(engine, batch) != n:
            raise ScenarioError("schedule_batch inserted fewer than asked")
        return due

    delays = _starts_after(bench, "due_lag", schedule)
    return _percentiles(
        bench, "due_lag", "due-time lag, one-time (other process)", delays, {99: 10.0}
    )


# --- scheduling, one per transaction and in batches --------------------------------------


def due_lag_cron(bench: Bench) -> list[Figure]:
    """From each run's time to its start: a ``* * * * * ?`` cron, every second for 20 s."""
    runs = max(5, bench.counts.latency_runs // 10)
    delays = _starts_after(
        bench,
        "due_lag_cron",
        lambda client, engine: {},
        extra=["--cron", "* * * * * ?"],
        measured=lambda key: key.startswith("tick@"),
        count=runs,
    )
    return _percentiles(bench, "due_lag_cron", "due-time lag, cron each second", delays, {99: 5.0})


def due_lag_retry(bench: Bench) -> list[Figure]:
    """From each retry's time to its start: executions 20 ms apart whose first attempt
    fails, with ``retry_base_delay`` 0.5 s (the default 30 s would make a long benchmark).
    Apart, so that the figure is the timer's and not a backlog's."""
    n = max(10, bench.counts.latency_runs // 2)

    def schedule(client: Scheduler, engine: Engine) -> dict[str, float]:
        now = client.clock.now()
        batch = [
            bench.task.instance(f"r{i:05d}", at=now + timedelta(milliseconds=200 + 20 * i))
            for i in range(n)
        ]
        if client.schedule_batch(engine, batch) != n:
            raise ScenarioError("schedule_batch inserted fewer than asked")
        return {}

    delays = _starts_after(
        bench,
        "due_lag_retry",
        schedule,
        extra=["--fail-first", "--retry-delay", "0.5"],
        measured=lambda key: key.endswith("#retry"),
        count=n,
    )
    return _percentiles(bench, "due_lag_retry", "due-time lag, retries", delays, {99: 5.0})
