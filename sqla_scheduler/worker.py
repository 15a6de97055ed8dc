"""Run a scheduler in the foreground: what ``sqla-scheduler worker module:attr`` does.

[`load_scheduler`][] finds the application's [`Scheduler`][sqla_scheduler.Scheduler] from a
``module:attr`` string, and [`run_worker`][] runs it until SIGINT or SIGTERM:

```python
from sqla_scheduler.worker import load_scheduler, run_worker

run_worker(load_scheduler("myapp.tasks:scheduler"))
```

The first signal stops the scheduler gracefully: no new picks, running executions get
``shutdown_max_wait`` to finish, and whatever is still running then is released for other
schedulers. A second signal cancels everything at once: running handlers are not waited
for, and their executions are released for other schedulers straight away.
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import (
    AsyncIterator,
    Callable,
    Collection,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn

import anyio

from sqla_scheduler._bridge import check_backend
from sqla_scheduler._durations import format_duration
from sqla_scheduler.exceptions import ConfigurationError, SchedulerError
from sqla_scheduler.scheduler import Scheduler

if TYPE_CHECKING:
    from sqla_scheduler._probes import Probes

__all__ = [
    "ENV_PREFIX",
    "WorkerError",
    "WorkerInterrupted",
    "configure_from_env",
    "load_scheduler",
    "metrics_collectors",
    "note_early_signals",
    "run_worker",
]

log = logging.getLogger("sqla_scheduler")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that stop a worker: the first gracefully, the second at once."""

FORCED_STOP_WITHIN = 10.0
"""Seconds after a second signal within which the process has ended, whatever its
threads wait on (a hook that never returns, a commit the database holds up): what is
not released by then stays picked, for revival."""


class WorkerError(SchedulerError):
    """A worker cannot start: a bad ``module:attr``, or an object there that is no scheduler."""


class WorkerInterrupted(WorkerError):
    """A second stop signal cancelled the worker before its graceful stop completed.

    Executions it still held were released without waiting for their handlers.
    """

    def __init__(self, signum: signal.Signals) -> None:
        super().__init__(f"stopped at once by a second {signum.name}")
        self.signal = signum
        """The signal that forced the stop."""


def load_scheduler(spec: str) -> Scheduler:
    """Import and return the [`Scheduler`][sqla_scheduler.Scheduler] named by ``spec``.

    ``spec`` is ``module:attr``, where ``module`` is a dotted module path and ``attr`` a
    (possibly dotted) attribute path inside it, e.g. ``myapp.jobs:app.scheduler``. If the
    attribute is a callable rather than a scheduler, it is called with no arguments as a
    factory and must return one. Raises [`WorkerError`][] with a one-line explanation
    when the spec is malformed, the module cannot be imported, the attribute is missing, or
    the object is not a scheduler. Errors raised by the application's own code while it is
    imported or while the factory runs propagate unchanged.
    """
    module_name, colon, attr_path = spec.partition(":")
    module_name, attr_path = module_name.strip(), attr_path.strip()
    if not colon or not module_name or not attr_path:
        raise WorkerError(f"expected MODULE:ATTR (e.g. myapp.tasks:scheduler), got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise WorkerError(f"cannot import module {module_name!r}: {exc}") from exc

    target: object = module
    walked = module_name
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise WorkerError(
                f"{walked!r} has no attribute {part!r} (looking up {spec!r})"
            ) from None
        walked = f"{walked}:{part}" if walked == module_name else f"{walked}.{part}"

    if isinstance(target, Scheduler):
        return target
    if callable(target) and not isinstance(target, type):
        made = target()
        if isinstance(made, Scheduler):
            return made
        raise WorkerError(
            f"{spec!r} is a factory that returned {type(made).__name__}, not a Scheduler"
        )
    got = f"the class {target.__name__}" if isinstance(target, type) else type(target).__name__
    raise WorkerError(f"{spec!r} is not a Scheduler (got {got})")


ENV_PREFIX = "SQLA_SCHEDULER_"
"""The prefix of the environment variables a worker applies over the scheduler's config."""


def configure_from_env(
    scheduler: Scheduler,
    environ: Mapping[str, str] | None = None,
    *,
    ignore: Collection[str] = (),
) -> dict[str, str]:
    """Apply the ``SQLA_SCHEDULER_*`` variables in ``environ`` over ``scheduler.config``.

    Return the variables applied, by name. Each names a config field
    (``SQLA_SCHEDULER_POLLING_INTERVAL=250ms``) and is read as
    [`SchedulerConfig.from_env`][sqla_scheduler.config.SchedulerConfig.from_env] reads it; fields
    no variable names keep the application's values. ``environ`` defaults to
    ``os.environ``; names in ``ignore`` are the command line's own variables
    (``SQLA_SCHEDULER_LOG_LEVEL``), skipped here.

    Raises [`ConfigurationError`][sqla_scheduler.ConfigurationError] naming the variable:
    for an unknown name (with the nearest valid one), a bad value, or a ``table_name`` or
    ``schema`` other than the application's own. The table is the one the application
    schedules into, so it is chosen where the application builds its scheduler, not for
    the worker alone. Call it before the scheduler runs.
    """
    source = os.environ if environ is None else environ
    applied = {
        name: value
        for name, value in sorted(source.items())
        if name.startswith(ENV_PREFIX) and name not in ignore
    }
    config = scheduler.config.replace_from_env(ENV_PREFIX, applied, ignore=ignore)
    for field in ("table_name", "schema"):
        mine, theirs = getattr(config, field), getattr(scheduler.config, field)
        if mine != theirs:
            name = ENV_PREFIX + field.upper()
            raise ConfigurationError(
                f"{name}: {applied[name]!r} differs from the application's {field} "
                f"({theirs!r}); a worker runs the table its application schedules into: set "
                f"it in the application's SchedulerConfig (e.g. with SchedulerConfig.from_env())"
            )
    scheduler.config = config
    return applied


def run_worker(
    scheduler: Scheduler,
    *,
    backend: str = "asyncio",
    health_port: int | None = None,
    health_host: str = "0.0.0.0",  # probes come from outside the pod
    collect_every: float | None = None,
) -> None:
    """Run ``scheduler`` in the foreground until SIGINT or SIGTERM; block until it stops.

    ``backend`` is the anyio backend, ``"asyncio"`` or ``"trio"`` (trio needs a sync
    ``Engine``). Before running, the database is reached once and the scheduler's table
    looked up, so a wrong URL or a missing migration fails at once: the database's own error
    (e.g. ``sqlalchemy.exc.OperationalError``) or a [`MissingTableError`][].

    The first signal stops the scheduler gracefully and this function then returns. A
    second one cancels everything at once and raises [`WorkerInterrupted`][]. Must be
    called from the main thread (signal handlers can only be installed there).

    A handler that ignores its cancellation cannot be stopped, and its event loop would
    wait for it forever: once the scheduler has stopped without it (``shutdown_max_wait``
    and a grace of a few seconds, the handler named in the log), the process exits at
    once, with status 0 (128 + the signal's number after a second signal).

    With ``health_port``, the worker serves ``/livez``, ``/readyz`` and ``/metrics`` on
    ``health_host:health_port`` while it runs (see ``sqla-scheduler worker --health-port``).

    With ``collect_every`` (seconds), the worker refreshes the table's gauges of each
    ``SchedulerMetrics`` among the scheduler's interceptors that often (its
    ``run_collector``, beside the scheduler: not a task, so not one of the executions it
    counts); a ``ValueError`` when the scheduler has none. One process per cluster is
    enough: the gauges count the whole table.
    """
    collectors = metrics_collectors(scheduler, collect_every)
    probes = None
    if health_port is not None:
        from sqla_scheduler._probes import Probes

        config = scheduler.config
        probes = Probes(
            scheduler.engine.url,
            port=health_port,
            host=health_host,
            table_name=config.table_name,
            schema=config.schema,
            stalled=partial(_stalled_for, scheduler),
        )
        probes.start()
    worker = _Worker(scheduler, probes, collectors)
    if _early:  # a stop asked for while the application loaded: it never starts
        worker.stop_requested_by = _early[0]
        log.info("received %s while loading: stopping before the scheduler starts", _early[0].name)
    try:
        anyio.run(worker.serve, backend=backend)
    finally:
        worker.disarm()
        if probes is not None:
            probes.stop()
    if worker.forced_by is not None:
        raise WorkerInterrupted(worker.forced_by)
    if worker.error is not None:
        raise worker.error


def metrics_collectors(
    scheduler: Scheduler, every: float | None
) -> list[Callable[[], Coroutine[Any, Any, object]]]:
    """What keeps ``scheduler``'s ``SchedulerMetrics`` gauges current every ``every``
    seconds (none without ``every``)."""
    if every is None:
        return []
    if not every > 0:
        raise ValueError(f"collect_every must be a number of seconds above 0, got {every!r}")
    try:
        from sqla_scheduler.integrations.prometheus import SchedulerMetrics
    except ImportError as exc:
        raise ValueError(f"collecting the gauges: {exc}") from None
    found = [i for i in scheduler.interceptors if isinstance(i, SchedulerMetrics)]
    if not found:
        raise ValueError(
            "collecting the gauges needs a SchedulerMetrics among the scheduler's "
            "interceptors (Scheduler(engine, tasks, interceptors=[SchedulerMetrics()])), and "
            f"{scheduler!r} has none"
        )
    return [partial(metrics.run_collector, scheduler, every) for metrics in found]


def _stalled_for(scheduler: Scheduler) -> float:
    """How long ``scheduler``'s running loop has owed work without progress (0 if none)."""
    runner = scheduler._loop.runner
    return 0.0 if runner is None else runner.held.owed_for(runner.config.concurrency)


class _Worker:
    """One foreground run: the scheduler in the host task, a signal watcher beside it."""

    def __init__(
        self,
        scheduler: Scheduler,
        probes: Probes | None = None,
        collectors: Sequence[Callable[[], Coroutine[Any, Any, object]]] = (),
    ) -> None:
        self.scheduler = scheduler
        self.probes = probes
        self.collectors = collectors
        self.stop_requested_by: signal.Signals | None = None
        self.forced_by: signal.Signals | None = None
        self.error: Exception | None = None
        #: Ends the process ``FORCED_STOP_WITHIN`` after a second signal (see ``_force``).
        self._deadline: threading.Timer | None = None

    def disarm(self) -> None:
        """The event loop has ended: the process may end as it will."""
        if self._deadline is not None:
            self._deadline.cancel()

    async def serve(self) -> None:
        with _stop_signals() as signals:
            async with anyio.create_task_group() as group:
                if signals is not None:
                    group.start_soon(self._watch, signals, group.cancel_scope)
                if self.probes is not None:
                    group.start_soon(self.probes.tick)
                for collect in self.collectors:
                    group.start_soon(collect)
                try:
                    check_backend(self.scheduler.engine)
                    # No checkpoint between this test and run() registering its runner, so
                    # a signal is either seen here or reaches scheduler.request_stop().
                    if self.stop_requested_by is None:
                        await self.scheduler.run()
                except Exception as exc:  # not BaseException: cancellation propagates
                    self.error = exc
                finally:
                    group.cancel_scope.cancel()
                    if self.scheduler._loop.left_running:
                        self._exit_leaving_handlers()

    def _exit_leaving_handlers(self) -> NoReturn:
        """End the process now: handlers that ignored their cancellation were left
        running (and named in the log), and the event loop would wait for them forever as
        it closes. Their executions are revived elsewhere once their heartbeats are stale."""
        status = 0 if self.forced_by is None else 128 + self.forced_by.value
        log.warning(
            "exiting with status %d without waiting for the handler(s) left running: %s",
            status,
            ", ".join(self.scheduler._loop.left_running),
        )
        _exit_now(status)

    def _force(self, sig: signal.Signals) -> None:
        """After a second signal: end the process ``FORCED_STOP_WITHIN`` from now unless
        the event loop has ended by then. A timer thread does it, since the loop may be
        waiting, shielded, on threads that wait on something that never comes."""

        def expire() -> None:
            log.error(
                "still stopping %ss after the second signal: exiting with status %d; "
                "executions not released by now stay picked and are revived once their "
                "heartbeats are stale (dead_after)",
                FORCED_STOP_WITHIN,
                128 + sig.value,
            )
            _exit_now(128 + sig.value)

        self._deadline = threading.Timer(FORCED_STOP_WITHIN, expire)
        self._deadline.daemon = True
        self._deadline.start()

    async def _watch(
        self, signals: AsyncIterator[signal.Signals], scope: anyio.CancelScope
    ) -> None:
        async for sig in signals:
            if self.stop_requested_by is None:
                self.stop_requested_by = sig
                log.info(
                    "received %s: stopping gracefully (up to %s for running executions; "
                    "send it again to stop at once)",
                    sig.name,
                    format_duration(self.scheduler.config.shutdown_max_wait),
                )
                self.scheduler.request_stop()
            else:
                self.forced_by = sig
                log.warning(
                    "received %s while stopping: stopping at once; executions still running are "
                    "released without waiting for their handlers (the process ends within %ss)",
                    sig.name,
                    FORCED_STOP_WITHIN,
                )
                self._force(sig)
                scope.cancel()
                return


#: The stop signals received while the application loaded (see ``note_early_signals``).
_early: list[signal.Signals] = []


def note_early_signals() -> None:
    """Note SIGINT and SIGTERM from now until ``run_worker`` installs its own handlers: a
    first signal while the application loads stops the worker cleanly before it starts
    (status 0), a second ends the process at once (128 + its number). Without this, a
    signal in the seconds an application takes to import killed the process outright.
    Call from the main thread, before loading the application."""

    def noted(signum: int, _frame: object) -> None:
        sig = signal.Signals(signum)
        if _early:
            _exit_now(128 + sig.value)
        _early.append(sig)

    for sig in STOP_SIGNALS:
        signal.signal(sig, noted)


def _exit_now(status: int) -> NoReturn:
    """End the process with ``status`` at once, its log written out first."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


@contextmanager
def _stop_signals() -> Iterator[AsyncIterator[signal.Signals] | None]:
    """Receive SIGINT and SIGTERM, or ``None`` where the platform cannot (Windows).

    Without a receiver, Ctrl-C raises ``KeyboardInterrupt`` as usual.
    """
    receiver = anyio.open_signal_receiver(*STOP_SIGNALS)
    try:
        signals = receiver.__enter__()
    except NotImplementedError:
        log.debug("signal handlers are not supported here; Ctrl-C interrupts the worker")
        signals = None
    if signals is None:
        yield None
        return
    try:
        yield signals
    finally:
        receiver.__exit__(None, None, None)
