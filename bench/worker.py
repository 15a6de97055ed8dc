"""One benchmark worker process: a Scheduler running a single no-op task until SIGTERM.

Started by ``bench/run.py``; not meant to be run by hand (but it can be)::

    python bench/worker.py --url postgresql+psycopg://postgres@127.0.0.1:5432/db \\
        --handler async --name w1

``--handler async`` runs ``async def`` handlers on an ``AsyncEngine``; ``--handler sync``
runs plain ``def`` handlers on a sync ``Engine``. The worker prints ``READY`` on stdout once
the scheduler's loop runs; with ``--report-starts`` each execution prints
``START <key> <time.time()> <its execution_time as epoch seconds>`` when its handler
begins, the key being its instance id (``#retry`` added on a retry). ``--cron EXPR`` adds
a recurring ``tick`` task on that cron schedule (key ``tick@<execution_time>``);
``--fail-first`` makes the first attempt of each ``noop`` execution fail,
``--retry-delay`` sets ``retry_base_delay``, ``--history`` the ``history`` setting and
``--max-concurrency`` the task's ``max_concurrency``, ``--rate-limit`` its ``rate_limit``
(text such as ``50000/s``); ``--transactional`` defines it with
``transactional=True``; ``--limited-beside N`` also registers a ``capped`` task with
``max_concurrency=N`` (which has no rows: what it costs the ``noop`` drain);
``--keep-result`` defines ``noop`` with ``keep_result=True``; ``--group-callback`` also
registers a ``callback`` task (a no-op that reports its start as ``callback@<instance>``)
for groups whose members are ``noop`` executions; ``--report-commits`` prints
``START committed@<instance> <time.time() as its COMMIT was sent> <execution_time>``
once an execution's success has been committed (a listener's ``on_success``).
``--history-retention`` sets ``history_retention``, ``--heartbeat-interval``
``heartbeat_interval`` (seconds; the maintenance pass that prunes history runs every two
heartbeat intervals) and ``--missed-heartbeat-limit`` ``missed_heartbeat_limit`` (with a
short interval, keep an execution from counting as dead after a fraction of a second).
``--hold`` makes each ``noop`` execution wait, once begun, until the worker gets SIGUSR1:
each SIGUSR1 releases the executions waiting at that moment (async handlers await an
``anyio.Event``, sync ones block their thread on a ``threading.Event``).
``--busy-ms MS`` makes each ``noop`` execution last MS ms once begun (sleeping, in steps),
and ``--progress-rate R`` makes it call ``ctx.report_progress`` R times a second meanwhile
(one report at the start of each step; without it, the same steps and no report).
``--until-stopped`` makes each ``noop`` execution run until ``cancel`` stops it,
printing ``START stopped@<instance> <time.time() as it saw the stop>
<execution_time>`` when it sees the stop: an async handler at its cancellation, a sync
one as ``ctx.cancelled`` is set. SIGTERM or SIGINT stops the scheduler gracefully
(``request_stop``) and the process exits 0.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import anyio
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from sqla_scheduler import (
    Cron,
    ExecutionContext,
    OneTimeTask,
    RecurringTask,
    Scheduler,
    SchedulerConfig,
    one_time,
    recurring,
)
from sqla_scheduler.listeners import SchedulerListener

TASK_NAME = "noop"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--url", required=True, help="SQLAlchemy URL (postgresql+psycopg://...)")
    parser.add_argument("--handler", choices=("async", "sync"), default="async")
    parser.add_argument("--name", required=True, help="scheduler_name (unique per process)")
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--polling-interval", type=float, default=10.0, help="seconds")
    parser.add_argument("--pick-lower-fraction", type=float, default=None)
    parser.add_argument("--pick-upper-fraction", type=float, default=None)
    parser.add_argument("--report-starts", action="store_true")
    parser.add_argument("--cron", default=None, help="also run a recurring task on this cron")
    parser.add_argument("--fail-first", action="store_true")
    parser.add_argument("--retry-delay", type=float, default=None, help="seconds")
    parser.add_argument("--history", choices=("failures", "all", "none"), default=None)
    parser.add_argument("--no-stats", action="store_true", help="stats=False: no counts")
    parser.add_argument("--max-concurrency", type=int, default=None, help="the task's limit")
    parser.add_argument("--rate-limit", default=None, help="the task's rate_limit (50000/s)")
    parser.add_argument("--transactional", action="store_true", help="transactional=True")
    parser.add_argument(
        "--limited-beside", type=int, default=None, help="also a 'capped' task with this limit"
    )
    parser.add_argument("--keep-result", action="store_true", help="keep_result=True")
    parser.add_argument(
        "--report-commits", action="store_true", help="report each success once committed"
    )
    parser.add_argument(
        "--group-callback", action="store_true", help="also a 'callback' task for groups"
    )
    parser.add_argument(
        "--listen-url", default=None, help="listen_url: a direct connection for LISTEN alone"
    )
    parser.add_argument(
        "--no-prepare",
        action="store_true",
        help="prepare no statement (behind a pooler in transaction mode)",
    )
    parser.add_argument(
        "--history-retention", type=float, default=None, help="history_retention, seconds"
    )
    parser.add_argument(
        "--heartbeat-interval", type=float, default=None, help="heartbeat_interval, seconds"
    )
    parser.add_argument(
        "--missed-heartbeat-limit", type=int, default=None, help="missed_heartbeat_limit"
    )
    parser.add_argument(
        "--hold", action="store_true", help="each noop execution waits for a SIGUSR1"
    )
    parser.add_argument(
        "--busy-ms", type=float, default=0.0, help="each noop execution lasts this long"
    )
    parser.add_argument(
        "--progress-rate", type=float, default=0.0, help="progress reports a second while busy"
    )
    parser.add_argument(
        "--until-stopped", action="store_true", help="each noop execution runs until stopped"
    )
    parser.add_argument("--log-level", default="WARNING")
    return parser.parse_args(argv)


def _emit(line: str) -> None:
    # One write per line, flushed, so the reader sees whole lines as soon as they happen.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _report(ctx: ExecutionContext[Any], key: str) -> None:
    _emit(f"START {key} {time.time():.6f} {ctx.execution_time.timestamp():.6f}")


class _Committed(SchedulerListener):
    """Reports each success once its outcome is committed, with the time its COMMIT was
    sent: the last commit on ``engine`` before ``on_success`` (in an idle worker running
    one execution at a time, the outcome's own; ``on_success`` is called after it)."""

    def __init__(self, engine: Engine | AsyncEngine) -> None:
        self.sent = 0.0
        sync_engine = engine.sync_engine if isinstance(engine, AsyncEngine) else engine
        event.listen(sync_engine, "commit", self._committing)

    def _committing(self, conn: Any) -> None:
        self.sent = time.time()

    def on_success(self, context: ExecutionContext[Any], duration: timedelta) -> None:
        due = context.execution_time.timestamp()
        _emit(f"START committed@{context.instance_id} {self.sent:.6f} {due:.6f}")


class Hold:
    """What held executions wait on: the events of the current round, replaced on each
    ``release`` so that executions beginning later wait for the next one."""

    def __init__(self) -> None:
        self.async_event = anyio.Event()
        self.thread_event = threading.Event()

    def release(self) -> None:
        async_event, thread_event = self.async_event, self.thread_event
        self.async_event, self.thread_event = anyio.Event(), threading.Event()
        async_event.set()
        thread_event.set()


#: How often a sync handler running until stopped looks at ``ctx.shutdown`` (the stop
#: itself ends its wait at once).
_SHUTDOWN_LOOK = 0.1


@dataclass(frozen=True, kw_only=True, slots=True)
class Work:
    """What each ``noop`` execution does once begun: last ``seconds`` in ``steps`` equal
    sleeps, reporting its progress at the start of each step when ``reports``; or, with
    ``until_stopped``, run until ``cancel`` stops it, printing when it saw the stop (a
    sync handler also ends when the worker stops)."""

    seconds: float = 0.0
    steps: int = 1
    reports: bool = False
    until_stopped: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Work | None:
        """``--busy-ms``, ``--progress-rate`` and ``--until-stopped``: a report every
        ``1 / rate`` seconds of the execution's time, one at least; ``None`` without
        them (the drains' handlers do nothing more)."""
        if not args.busy_ms and not args.until_stopped:
            return None
        seconds = args.busy_ms / 1000.0
        steps = max(1, round(seconds * args.progress_rate))
        reports = args.progress_rate > 0
        return cls(seconds=seconds, steps=steps, reports=reports, until_stopped=args.until_stopped)

    async def run_async(self, ctx: ExecutionContext[Any]) -> None:
        if self.until_stopped:
            try:
                # the worker's stop waits for it (shutdown_max_wait): every scenario
                # stops its executions first
                await anyio.sleep_forever()
            except anyio.get_cancelled_exc_class():
                _report(ctx, f"stopped@{ctx.instance_id}")
                raise
            return
        for step in range(self.steps):
            if self.reports:
                await ctx.report_progress(step / self.steps, f"step {step + 1} of {self.steps}")
            await anyio.sleep(self.seconds / self.steps)

    def run_sync(self, ctx: ExecutionContext[Any]) -> None:
        if self.until_stopped:
            while not ctx.shutdown.is_set():
                if ctx.cancelled.wait(_SHUTDOWN_LOOK):
                    _report(ctx, f"stopped@{ctx.instance_id}")
                    ctx.raise_if_cancelled()
            return
        for step in range(self.steps):
            if self.reports:
                ctx.report_progress(step / self.steps, f"step {step + 1} of {self.steps}")
            time.sleep(self.seconds / self.steps)


def make_task(
    handler_kind: str,
    report_starts: bool,
    fail_first: bool = False,
    max_concurrency: int | None = None,
    transactional: bool = False,
    keep_result: bool = False,
    rate_limit: str | None = None,
    hold: Hold | None = None,
    work: Work | None = None,
) -> OneTimeTask[Any]:
    """The ``noop`` task, with an ``async def`` or a plain ``def`` handler; with ``hold``,
    each execution waits for its release once begun; with ``work``, it does that."""

    def begin(ctx: ExecutionContext[Any]) -> None:
        retry = ctx.consecutive_failures > 0
        if report_starts:
            _report(ctx, ctx.instance_id + ("#retry" if retry else ""))
        if fail_first and not retry:
            raise RuntimeError("the first attempt fails (--fail-first)")

    define = one_time(
        TASK_NAME,
        max_concurrency=max_concurrency,
        transactional=transactional,
        keep_result=keep_result,
        rate_limit=rate_limit,
    )
    if handler_kind == "async":

        async def noop_async(ctx: ExecutionContext[Any]) -> None:
            begin(ctx)
            if hold is not None:
                await hold.async_event.wait()
            if work is not None:
                await work.run_async(ctx)

        return define(noop_async)

    def noop_sync(ctx: ExecutionContext[Any]) -> None:
        begin(ctx)
        if hold is not None:
            hold.thread_event.wait()
        if work is not None:
            work.run_sync(ctx)

    return define(noop_sync)


def make_tick(expression: str) -> RecurringTask[Any]:
    """The recurring ``tick`` task on ``expression``, reporting each run by its time."""

    async def tick(ctx: ExecutionContext[Any]) -> None:
        _report(ctx, f"tick@{ctx.execution_time.timestamp():.6f}")

    return recurring("tick", Cron(expression))(tick)


def make_capped(limit: int) -> OneTimeTask[Any]:
    """The ``capped`` task, limited to ``limit`` at once: registered beside ``noop``."""

    async def capped(ctx: ExecutionContext[Any]) -> None:
        _report(ctx, f"capped@{ctx.instance_id}")

    return one_time("capped", max_concurrency=limit)(capped)


def make_callback() -> OneTimeTask[Any]:
    """The ``callback`` task of groups of ``noop`` executions."""

    async def callback(ctx: ExecutionContext[Any]) -> None:
        _report(ctx, f"callback@{ctx.instance_id}")

    return one_time("callback")(callback)


def make_config(args: argparse.Namespace) -> SchedulerConfig:
    """The scheduler's config from the command line."""
    extra: dict[str, Any] = {}
    if args.pick_lower_fraction is not None:
        extra["pick_lower_fraction"] = args.pick_lower_fraction
    if args.pick_upper_fraction is not None:
        extra["pick_upper_fraction"] = args.pick_upper_fraction
    if args.retry_delay is not None:
        extra["retry_base_delay"] = timedelta(seconds=args.retry_delay)
    if args.history is not None:
        extra["history"] = args.history
    if args.listen_url is not None:
        extra["listen_url"] = args.listen_url
    if args.no_prepare:
        extra["prepared_statements"] = False
    if args.no_stats:
        extra["stats"] = False
    if args.history_retention is not None:
        extra["history_retention"] = timedelta(seconds=args.history_retention)
    if args.heartbeat_interval is not None:
        extra["heartbeat_interval"] = timedelta(seconds=args.heartbeat_interval)
    if args.missed_heartbeat_limit is not None:
        extra["missed_heartbeat_limit"] = args.missed_heartbeat_limit
    return SchedulerConfig(
        concurrency=args.concurrency,
        polling_interval=timedelta(seconds=args.polling_interval),
        scheduler_name=args.name,
        shutdown_max_wait=timedelta(seconds=10),
        **extra,
    )


async def serve(args: argparse.Namespace) -> None:
    """Run the scheduler until SIGTERM/SIGINT, then stop it gracefully."""
    engine: Engine | AsyncEngine
    options: dict[str, Any] = {"pool_size": args.concurrency + 5}
    if args.no_prepare:
        options["connect_args"] = {"prepare_threshold": None}
    hold = Hold() if args.hold else None
    if args.handler == "async":
        engine = create_async_engine(args.url, **options)
    else:
        engine = create_engine(args.url, **options)
    tasks: list[Any] = [
        make_task(
            args.handler,
            args.report_starts,
            args.fail_first,
            args.max_concurrency,
            args.transactional,
            args.keep_result,
            args.rate_limit,
            hold,
            Work.from_args(args),
        )
    ]
    if args.group_callback:
        tasks.append(make_callback())
    if args.cron is not None:
        tasks.append(make_tick(args.cron))
    if args.limited_beside is not None:
        tasks.append(make_capped(args.limited_beside))
    listeners = [_Committed(engine)] if args.report_commits else []
    scheduler = Scheduler(engine, tasks, make_config(args), listeners=listeners)
    try:
        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGUSR1) as signals:
            async with scheduler:
                _emit("READY")
                async for signum in signals:
                    if signum != signal.SIGUSR1:
                        break
                    if hold is not None:
                        hold.release()
                scheduler.request_stop()
    finally:
        if isinstance(engine, AsyncEngine):
            await engine.dispose()
        else:
            engine.dispose()
    _emit("STOPPED")


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format=f"%(asctime)s {args.name} %(levelname)s %(name)s: %(message)s",
    )
    anyio.run(serve, args)


if __name__ == "__main__":
    main()
