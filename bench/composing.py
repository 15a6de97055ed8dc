"""What composed work costs: a drain with a group finishing beside it, the time from a
group's last member to its callback's start, and the time from a kept result's commit
to the return of ``Scheduler.wait``.

- ``drain_with_group``: ``drain_rows`` due executions of the bench's no-op task and half
  as many more as the members of one group (with a callback), drained together by one
  async worker: each batch of outcomes holding members also counts the group down and
  keeps the members' results. Held to 90% of ``drain_async_1`` (rows per second).
- ``callback_latency``: an idle async worker; each round schedules a group of one no-op
  member with a callback, and times from the member's outcome being recorded (its
  result's ``finished_at``: the time its transaction took, before its statements, so
  the commit is inside the figure) to the callback's start: the commit with the
  count-down, the NOTIFY, the pick and the read of ``ctx.group``. PostgreSQL target:
  p50 <= 5 ms.
- ``wait_latency``: an idle async worker runs a no-op task with ``keep_result``; each
  round schedules one execution due 50 ms later and waits for its result in this
  process (``Scheduler.wait`` on a sync engine, listening before the execution starts).
  ``wait_commit`` times from the outcome's commit (the moment the worker sent its
  COMMIT, so the commit itself is inside the figure) to the return of ``wait``: the
  commit, the NOTIFY's way to this process and what ``wait`` does with it. PostgreSQL
  target: p50 <= 3 ms. ``wait_latency`` times the same rounds from the outcome being recorded
  (``Result.finished_at``, as above: the outcome's transaction is inside the figure).
- ``big_group``: one group of ``big_group`` (100,000) members with a callback, scheduled in
  one call and drained by one async worker: the rate from the group's commit to the
  callback's start, beside a plain drain of as many rows in the same run (``big_plain``)
  and one of as many rows of a task that keeps its results, as every member does
  (``big_kept``); the callback must start once, after every
  member, and the group must count every member as finished (no finish scans the
  members, so a large group drains like a small one).

Both worker and bench read one machine's clock (the worker through PostgreSQL's).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from sqlalchemy import Engine

from bench.harness import TASK_NAME, Bench
from bench.results import Figure, ScenarioError
from bench.scenarios import _percentiles, drain
from bench.workers import Worker, stop_workers
from sqla_scheduler import ExecutionContext, Scheduler, TaskInstance, one_time


async def _nothing(ctx: ExecutionContext[Any]) -> None:
    """The callback's handler, as this process defines it to make its instances."""


CALLBACK = one_time("callback")(_nothing)


def drain_with_group(bench: Bench) -> Figure:
    plain = bench.counts.drain_rows
    members = max(plain // 2, 10)

    def schedule(client: Scheduler, engine: Engine, instances: list[TaskInstance[Any]]) -> int:
        inserted = client.schedule_batch(engine, instances[:plain])
        group = client.schedule_group(engine, instances[plain:], then=CALLBACK.instance("after"))
        return inserted + group.total

    return drain(
        bench,
        "drain_with_group",
        f"drain: 1 process, async, {plain:,} rows and a group of {members:,} members",
        "async",
        1,
        floor_key="drain_async_1",
        extra=["--group-callback"],
        rows=plain + members,
        schedule=schedule,
    )


def _rounds(
    bench: Bench,
    name: str,
    extra: list[str],
    run: Any,
    pairs: dict[str, list[tuple[str, str]]],
) -> dict[str, list[float]]:
    """Run an idle async worker reporting starts, call ``run(client, engine)`` (which
    returns this process's own marks by key), and return for each list of ``(later,
    earlier)`` key pairs in ``pairs`` the ms from each ``earlier``'s start (or mark) to
    its ``later``'s, sorted."""
    keys = [key for listed in pairs.values() for pair in listed for key in pair]
    db = bench.new_db(name)
    engine = bench.engine(db)
    worker = Worker(
        bench.url(db, use_async=True),
        f"{name}-w0",
        "async",
        polling_interval=bench.polling_interval,
        report_starts=True,
        extra=extra,
    )
    marks: dict[str, float] = {}
    try:
        worker.wait_ready(60)
        with engine.connect():
            pass
        time.sleep(0.5)  # let the worker's first (empty) poll finish
        marks = run(Scheduler(engine, [bench.task]), engine)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with worker.starts_lock:
                if all(key in worker.starts or key in marks for key in keys):
                    break
            time.sleep(0.02)
    finally:
        problems = stop_workers([worker])
        engine.dispose()
        bench.problems.extend(f"{name}: {p}" for p in problems)
    with worker.starts_lock:
        times = {**worker.starts, **marks}
    found: dict[str, list[float]] = {}
    for what, listed in pairs.items():
        delays = [(times[a] - times[b]) * 1000.0 for a, b in listed if a in times and b in times]
        if len(delays) < max(2, len(listed) // 2):
            raise ScenarioError(f"{name}: only {len(delays)} of {len(listed)} rounds completed")
        found[what] = sorted(delays)
    return found


def callback_latency(bench: Bench) -> list[Figure]:
    n, gap = bench.counts.latency_runs, bench.counts.latency_gap
    keys = [(f"callback@c{i:05d}", f"m{i:05d}") for i in range(n)]

    def run(client: Scheduler, engine: Engine) -> dict[str, float]:
        for i in range(n):
            member = bench.task.instance(f"m{i:05d}")
            client.schedule_group(engine, [member], then=CALLBACK.instance(f"c{i:05d}"))
            time.sleep(gap)
        time.sleep(0.5)  # the last member's outcome is recorded by now
        recorded: dict[str, float] = {}
        for i in range(n):
            result = client.result(engine, TASK_NAME, f"m{i:05d}")
            if result is not None:
                recorded[f"m{i:05d}"] = result.finished_at.timestamp()
        return recorded

    delays = _rounds(bench, "callback_latency", ["--group-callback"], run, {"": keys})[""]
    targets = {50: 5.0} if bench.server.name == "postgresql" else {}
    return _percentiles(
        bench, "callback_latency", "member's outcome to callback's start", delays, targets
    )


def wait_latency(bench: Bench) -> list[Figure]:
    n, gap = bench.counts.latency_runs, bench.counts.latency_gap
    kept = one_time(TASK_NAME, keep_result=True)(_nothing)

    def run(client: Scheduler, engine: Engine) -> dict[str, float]:
        marks: dict[str, float] = {}
        for i in range(n):
            key = f"k{i:05d}"
            at = client.clock.now() + timedelta(milliseconds=50)
            client.schedule(engine, kept.instance(key, at=at))
            result = client.wait(engine, TASK_NAME, key, timeout=10)
            marks[f"returned@{key}"] = time.time()
            marks[f"recorded@{key}"] = result.finished_at.timestamp()
            if not result.succeeded:
                raise ScenarioError(f"wait_latency: {key} {result.outcome}")
            time.sleep(gap)
        return marks

    pairs = {
        "committed": [(f"returned@k{i:05d}", f"committed@k{i:05d}") for i in range(n)],
        "recorded": [(f"returned@k{i:05d}", f"recorded@k{i:05d}") for i in range(n)],
    }
    delays = _rounds(bench, "wait_latency", ["--keep-result", "--report-commits"], run, pairs)
    targets = {50: 3.0} if bench.server.name == "postgresql" else {}
    return [
        *_percentiles(
            bench, "wait_commit", "outcome's COMMIT sent to wait()'s return",
            delays["committed"], targets,
        ),
        *_percentiles(
            bench, "wait_latency", "outcome recorded to wait()'s return",
            delays["recorded"], {},
        ),
    ]  # fmt: skip


def big_group(bench: Bench) -> Figure:
    n = bench.counts.big_group
    drain(
        bench,
        "big_plain",
        f"drain: 1 process, async, {n:,} rows (the big group's plain peer)",
        "async",
        1,
        floor_key="drain_async_1",
        rows=n,
    )
    drain(
        bench,
        "big_kept",
        f"drain: 1 process, async, {n:,} rows of a task with keep_result",
        "async",
        1,
        floor_key="big_plain",
        extra=["--keep-result"],
        rows=n,
    )
    db = bench.new_db("big_group")
    engine = bench.engine(db)
    worker = Worker(
        bench.url(db, use_async=True),
        "big_group-w0",
        "async",
        polling_interval=bench.polling_interval,
        extra=["--group-callback"],  # the callback reports its start; members do not
    )
    try:
        worker.wait_ready(60)
        client = Scheduler(engine, [bench.task, CALLBACK])
        instances = [bench.task.instance(f"g{i:07d}") for i in range(n)]
        with engine.connect():
            pass  # open the pool's connection before the clock starts
        t0 = time.time()
        group = client.schedule_group(engine, instances, then=CALLBACK.instance("big"))
        scheduled = time.time()
        deadline = time.monotonic() + 600
        progress: list[tuple[float, int]] = []  # (time, members finished)
        while time.monotonic() < deadline:
            with worker.starts_lock:
                started = worker.starts.get("callback@big")
            if started is not None:
                break
            now = client.group(engine, group.id)
            if now is not None:
                progress.append((time.time(), now.done))
            time.sleep(0.2)
        else:
            raise ScenarioError(f"big_group: no callback start within 600s of {n:,} members")
        final = client.group(engine, group.id)
    finally:
        problems = stop_workers([worker])
        engine.dispose()
        bench.problems.extend(f"big_group: {p}" for p in problems)
    if final is None or group.total != n or final.remaining != 0 or final.done != n:
        raise ScenarioError(f"big_group: the group counted {final!r} of {n:,} members")
    return bench.add(
        Figure(
            "big_group",
            f"a group of {n:,} members drained to its callback, 1 process, async",
            n / (started - scheduled),
            "rows/s",
            floor_key="big_kept",
            notes=(
                f"schedule_group took {scheduled - t0:.2f}s; callback started "
                f"{started - scheduled:.2f}s after; every member counted: "
                f"{dict(final.outcomes)}; {_fifths(progress, n)}"
            ),
        )
    )


def _fifths(progress: list[tuple[float, int]], n: int) -> str:
    """The drain rate over each fifth of the members, from ``(time, done)`` samples: a
    finish that scanned the group's members would slow it fifth by fifth."""
    rates = []
    for k in range(5):
        low, high = n * k // 5, n * (k + 1) // 5
        inside = [(t, done) for t, done in progress if low <= done <= high]
        if len(inside) < 2 or inside[-1][0] == inside[0][0]:
            return "too few samples for the rate per fifth"
        (t0, d0), (t1, d1) = inside[0], inside[-1]
        rates.append(f"{(d1 - d0) / (t1 - t0):,.0f}")
    return "rows/s per fifth of the members: " + ", ".join(rates)
