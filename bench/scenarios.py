"""The library's scenarios: due executions drained by ``bench/worker.py`` processes,
commit-to-start latency and due-time lag of an idle worker, commit-to-start latency of a
scheduler in the scheduling process itself, and ``Scheduler.schedule`` and
``Scheduler.schedule_batch`` timed on a fresh database each.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from sqlalchemy import Engine, create_engine
from sqlalchemy.ext.asyncio import create_async_engine

from bench.harness import TASK_NAME, Bench
from bench.raw_listener import CHANNEL as RAW_CHANNEL
from bench.results import Figure, ScenarioError, better
from bench.workers import WORKER_SCRIPT, Worker, stop_workers
from sqla_scheduler import ExecutionContext, Scheduler, SchedulerConfig, TaskInstance, one_time

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
    url_of: Callable[[str], str] | None = None,
    schedule: Callable[[Scheduler, Engine, list[TaskInstance[Any]]], int] | None = None,
) -> Figure:
    """``drain_rows`` (or ``rows``) due executions scheduled at once (by ``schedule``,
    default ``schedule_batch``), drained by ``processes`` workers;
    on a fresh database, or on ``db`` (which may hold other rows: only the due rows of the
    bench's task are counted). ``url_of`` gives the workers' URL of a database (default
    the server's own)."""
    n = rows or bench.counts.drain_rows
    db = db or bench.new_db(key)
    url = url_of(db) if url_of else bench.url(db, use_async=handler == "async")
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
            if schedule is None:
                inserted = client.schedule_batch(engine, instances)
            else:
                inserted = schedule(client, engine, instances)
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


#: Rounds of a drain and the plain drain measured just before it (``beside_plain``).
PAIRED_ROUNDS = 2


def beside_plain(
    bench: Bench,
    key: str,
    measure: Callable[[], Figure],
    plain: Callable[[], Figure] | None = None,
) -> Figure:
    """``measure()``, a drain of one async worker, against the plain drain
    (``drain_async_1``'s, or ``plain()``, whose key must be ``<key>_plain``) run just
    before it: ``PAIRED_ROUNDS`` rounds of the two, each side keeping its best round. The
    plain drain is the row ``<key>_plain``, the figure's floor.

    In a full run the machine's pace moves over minutes. Measured against the plain drain
    at the start of the run, the rate-limited drain came to 47% and 57% in two full runs,
    and to 104% in a run of its own."""
    best_plain: Figure | None = None
    best: Figure | None = None
    plain = plain or partial(
        drain,
        bench,
        f"{key}_plain",
        "drain: 1 process, async handlers, beside the row below",
        "async",
        1,
        floor_key="",  # it is the floor
    )
    for _round in range(PAIRED_ROUNDS):
        best_plain, best = better(best_plain, plain()), better(best, measure())
    assert best_plain is not None
    assert best is not None
    for kept in (best_plain, best):
        kept.notes += f"; best of {PAIRED_ROUNDS} rounds, each after the plain drain"
        bench.add(kept)
    return best


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
    url_of: Callable[[str], str] | None = None,
    extra_of: Callable[[str], Sequence[str]] | None = None,
) -> list[float]:
    """Run one idle async worker (the default configuration but for ``--polling-interval``
    and ``extra`` arguments) and let ``schedule`` schedule from this process; return the
    delay of each start, in ms.

    ``schedule`` returns when each execution should start (epoch seconds, by the worker's
    key for it), and the worker runs until each has started. If it returns nothing, the
    starts whose keys are ``measured`` count, from when each was due (as the worker
    reports), and the worker runs until ``count`` of them have started. ``script`` is
    the worker's program (the raw floor's ``bench/raw_listener.py`` speaks its protocol).
    ``url_of`` gives the URL of a database for the worker and this process's engine
    (default the server's own): a pooler's, where neither may prepare statements;
    ``extra_of`` the worker's further arguments for a database.
    """
    db = bench.new_db(name)
    if url_of is None:
        url, engine = bench.url(db, use_async=True), bench.engine(db)
    else:
        url = url_of(db)
        engine = create_engine(url, connect_args={"prepare_threshold": None})
    worker = Worker(
        url,
        f"{name}-w0",
        "async",
        polling_interval=bench.polling_interval,
        report_starts=True,
        extra=[*extra, *(extra_of(db) if extra_of else ())],
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
    bench: Bench,
    key: str,
    label: str,
    delays: list[float],
    targets: dict[int, float],
    counted: str = "started",
) -> list[Figure]:
    """p50, p95 and p99 of ``delays`` (ms) as figures ``<key>_p50`` and so on, each held to
    its target in ``targets`` (by percentile) where there is one; the note says how many
    were ``counted``."""
    q = statistics.quantiles(delays, n=100, method="inclusive")
    note = f"{len(delays)} {counted}; min {delays[0]:.2f} ms, max {delays[-1]:.2f} ms"
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


def _paced(
    bench: Bench,
    commit: Callable[[str], None],
    *,
    runs: int | None = None,
    gap: float | None = None,
    jitter: float = 0.0,
) -> dict[str, float]:
    """``commit`` the instances ``l00000``, ``l00001``... one at a time, ``runs`` of them
    (default ``latency_runs``), one every ``gap`` (default ``latency_gap``), each gap
    stretched or shrunk by up to ``jitter`` of it at random (seeded: the same in every
    run); return when each commit returned (epoch seconds, by instance)."""
    n = bench.counts.latency_runs if runs is None else runs
    gap = bench.counts.latency_gap if gap is None else gap
    rng = random.Random(31)
    commits: dict[str, float] = {}
    due = time.perf_counter()
    for i in range(n):
        key = f"l{i:05d}"
        commit(key)
        commits[key] = time.time()
        due += gap * rng.uniform(1 - jitter, 1 + jitter)
        pause = due - time.perf_counter()
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
                cur = raw.cursor()
                cur.execute(bench.server.insert_sql, bench.server.row(key))
                cur.execute("SELECT pg_notify(%s, '')", (RAW_CHANNEL,))
                cur.close()
                raw.commit()

            return _paced(bench, commit)

    delays = _starts_after(bench, "floor_latency", schedule, script=RAW_LISTENER)
    label = "raw commit-to-pick floor: INSERT + NOTIFY, LISTEN + UPDATE"
    return _percentiles(bench, "floor_latency", label, delays, {})


def latency_commits(bench: Bench) -> Callable[[Scheduler, Engine], dict[str, float]]:
    """``latency``'s commits: due executions scheduled one at a time by this process.

    With NOTIFY the commit wakes the worker: 20 ms apart. Without it (MariaDB) the
    worker's due-time read, once a second, finds the work: ``probe_latency_runs``
    commits about 200 ms apart (each gap 150 to 250 ms, so that the commits fall at every
    point of the probe's second, not at five)."""
    counts = bench.counts

    def schedule(client: Scheduler, engine: Engine) -> dict[str, float]:
        def commit(key: str) -> None:
            if not client.schedule(engine, bench.task.instance(key)):
                raise ScenarioError(f"schedule of {key} inserted nothing")

        if bench.server.notifies:
            return _paced(bench, commit)
        return _paced(
            bench, commit, runs=counts.probe_latency_runs, gap=counts.probe_gap, jitter=0.25
        )

    return schedule


def latency(bench: Bench) -> list[Figure]:
    """From each commit to its execution's start, due executions scheduled one at a time
    by this process for an idle worker process (``latency_commits``)."""
    delays = _starts_after(bench, "latency", latency_commits(bench))
    if bench.server.notifies:
        return _percentiles(bench, "latency", "commit-to-start latency", delays, {50: 1.2, 99: 3.0})
    label = "commit-to-start latency, other process (due-time read)"
    return _percentiles(bench, "latency", label, delays, {99: 1000.0})


def same_process(bench: Bench) -> list[Figure]:
    """From each commit to its execution's start, with the scheduler running in the
    process that schedules, on an ``AsyncEngine`` (the default configuration but for
    ``--polling-interval``): the commit wakes it, no NOTIFY nor probe needed.
    ``latency_runs`` rounds, ``latency_gap`` apart, each waiting for its start."""
    n, gap = bench.counts.latency_runs, bench.counts.latency_gap
    db = bench.new_db("same_process")
    commits: dict[str, float] = {}
    starts: dict[str, float] = {}
    started: dict[str, anyio.Event] = {}

    async def noop(ctx: ExecutionContext[Any]) -> None:
        starts[ctx.instance_id] = time.perf_counter()
        started[ctx.instance_id].set()

    task = one_time(TASK_NAME)(noop)
    config = SchedulerConfig(polling_interval=timedelta(seconds=bench.polling_interval))

    async def rounds() -> None:
        engine = create_async_engine(bench.url(db, use_async=True))
        try:
            async with Scheduler(engine, [task], config) as scheduler:
                async with engine.connect():
                    pass  # open the pool's connection before the clock starts
                await anyio.sleep(0.5)  # let the first (empty) poll finish
                due = time.perf_counter()
                for i in range(n):
                    key = f"p{i:05d}"
                    started[key] = anyio.Event()
                    if not await scheduler.schedule(engine, task.instance(key)):
                        raise ScenarioError(f"schedule of {key} inserted nothing")
                    commits[key] = time.perf_counter()
                    with anyio.fail_after(bench.polling_interval + 10):
                        await started[key].wait()
                    due += gap
                    await anyio.sleep(max(0.0, due - time.perf_counter()))
        finally:
            await engine.dispose()

    anyio.run(rounds)
    delays = sorted((starts[k] - commits[k]) * 1000.0 for k in commits)
    label = "commit-to-start latency, same process"
    return _percentiles(bench, "same_process", label, delays, {99: 10.0})


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
    # Without NOTIFY the worker hears of them from its probe, up to a second later.
    target = 10.0 if bench.server.notifies else 1000.0
    return _percentiles(
        bench, "due_lag", "due-time lag, one-time (other process)", delays, {99: target}
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
