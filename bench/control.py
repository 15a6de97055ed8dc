"""What control costs: the drain of a task with ``max_concurrency=5``, and of one with a
``rate_limit`` above the drain rate, beside the unlimited drain (``drain_async_1``), and how
long a resumed task's due execution waits to start.

- ``drain_limited``: ``drain_rows / 10`` due executions of the bench's no-op task, limited
  to 5 at once, drained by one async worker (concurrency 10). Each pick of a limited task
  is a transaction that takes the task's advisory lock and counts its picked executions.
- ``drain_beside_limited``: the drain of ``drain_async_1``, by a worker that also
  registers a task with ``max_concurrency=5`` (no rows of its own): a limit must not slow
  the picks of tasks without one (target >= 90% of ``drain_async_1``).
- ``drain_rated``: the drain of ``drain_async_1`` (``drain_rows`` due executions, one async
  worker, concurrency 10) of the no-op task with ``rate_limit=RATE``, well above the
  unlimited drain's rate, so that the limit itself holds nothing back: what counting each
  start in the task's slots costs (target >= 90% of ``drain_async_1``). Each pick of the
  task is a transaction that takes its lock, finds free slots and stamps them.
- ``resume``: an idle async worker (default configuration but for the poll) and a paused
  task; each round schedules one execution (due now, not picked: the task is paused),
  then resumes the task, and times from the resume's commit to the handler's start; the
  task is paused again before the next round.
"""

from __future__ import annotations

import time

from sqlalchemy import Engine

from bench.harness import TASK_NAME, Bench
from bench.results import Figure, ScenarioError
from bench.scenarios import _percentiles, _starts_after, drain
from sqla_scheduler import Scheduler

LIMIT = 5
#: The rate limit of ``drain_rated``: some three times the unlimited drain's rate here.
RATE = "50000/s"


def drain_limited(bench: Bench) -> Figure:
    return drain(
        bench,
        "drain_limited",
        f"drain: 1 process, async, max_concurrency={LIMIT}",
        "async",
        1,
        floor_key="drain_async_1",
        extra=["--max-concurrency", str(LIMIT)],
        rows=max(bench.counts.drain_rows // 10, 200),
    )


def drain_beside_limited(bench: Bench) -> Figure:
    return drain(
        bench,
        "drain_beside_limited",
        f"drain: 1 process, async, beside a task with max_concurrency={LIMIT}",
        "async",
        1,
        floor_key="drain_async_1",
        extra=["--limited-beside", str(LIMIT)],
    )


def drain_rated(bench: Bench) -> Figure:
    return drain(
        bench,
        "drain_rated",
        f"drain: 1 process, async, rate_limit={RATE}",
        "async",
        1,
        floor_key="drain_async_1",
        extra=["--rate-limit", RATE],
    )


def resume_latency(bench: Bench) -> list[Figure]:
    """From each resume's commit to the start of the execution it lets run."""

    def schedule(client: Scheduler, engine: Engine) -> dict[str, float]:
        marks: dict[str, float] = {}
        n, gap = bench.counts.latency_runs, bench.counts.latency_gap
        for i in range(n):
            key = f"r{i:05d}"
            client.pause(engine, TASK_NAME)
            if not client.schedule(engine, bench.task.instance(key)):
                raise ScenarioError(f"schedule of {key} inserted nothing")
            time.sleep(gap)  # the worker hears of it, and picks nothing: the task is paused
            client.resume(engine, TASK_NAME)
            marks[key] = time.time()
            time.sleep(gap)
        return marks

    delays = _starts_after(bench, "resume", schedule)
    return _percentiles(bench, "resume", "resume-to-start latency", delays, {})
