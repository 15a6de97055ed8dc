"""``sqla-scheduler worker``: run the application's Scheduler until a signal, its config
from the options and the ``SQLA_SCHEDULER_*`` variables."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from typing import NoReturn

import click

from sqla_scheduler._limits import MAX_CONCURRENCY
from sqla_scheduler.cli._app import _load_app
from sqla_scheduler.cli._errors import _database_errors, _fail
from sqla_scheduler.cli._params import _APP_ENVVAR, _env_option, _Interval, _Whole
from sqla_scheduler.cli._root import _command_line_envvars
from sqla_scheduler.exceptions import ConfigurationError

_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@click.command("worker")
@click.argument("spec", metavar="MODULE:ATTR", envvar=_APP_ENVVAR)
@click.option(
    "--concurrency",
    type=_Whole(1, MAX_CONCURRENCY),
    help="Executions run in parallel (default: $SQLA_SCHEDULER_CONCURRENCY, else the "
    "scheduler's config).",
)
@click.option(
    "--name",
    help="Scheduler name written to picked_by (default: $SQLA_SCHEDULER_SCHEDULER_NAME, else "
    "the config's).",
)
@_env_option(
    "--backend",
    type=click.Choice(["asyncio", "trio"]),
    default="asyncio",
    envvar="BACKEND",
    help="anyio backend; trio needs a sync Engine.",
)
@_env_option(
    "--log-level",
    type=click.Choice(_LOG_LEVELS, case_sensitive=False),
    default="info",
    envvar="LOG_LEVEL",
    help="Level of the log written to stderr.",
)
@_env_option(
    "--health-port",
    type=_Whole(0, 65535),
    default=None,
    envvar="HEALTH_PORT",
    help="Serve GET /livez, /readyz and /metrics on this port while the worker runs "
    "(for Kubernetes' httpGet probes; 0 takes a free port).",
)
@_env_option(
    "--health-host",
    default="0.0.0.0",
    envvar="HEALTH_HOST",
    help="The address --health-port listens on.",
)
@_env_option(
    "--collect-metrics",
    "collect_every",
    type=_Interval(),
    default=None,
    envvar="COLLECT_METRICS",
    metavar="DURATION",
    help="Refresh the table's gauges of the application's SchedulerMetrics this often "
    "(e.g. 15s), for /metrics; one process per cluster is enough.",
)
def worker(
    spec: str,
    concurrency: int | None,
    name: str | None,
    backend: str,
    log_level: str,
    health_port: int | None,
    health_host: str,
    collect_every: float | None,
) -> None:
    """Run the Scheduler at MODULE:ATTR until SIGINT or SIGTERM.

    MODULE:ATTR defaults to $SQLA_SCHEDULER_APP. ATTR may be dotted (app.scheduler) and may
    name a factory that returns a Scheduler.
    The first signal stops gracefully (running executions get shutdown_max_wait), a second
    one at once. Exit status: 0 after a graceful stop, 1 when the worker fails, 2 for a
    bad MODULE:ATTR, option or SQLA_SCHEDULER_* variable, 128 + the signal number after a
    forced stop.

    SQLA_SCHEDULER_<KEY> variables set the scheduler's config keys
    (SQLA_SCHEDULER_POLLING_INTERVAL=250ms): options win over the environment, the
    environment over the application's own config. An unknown SQLA_SCHEDULER_ name is an
    error. The table (table_name, schema) stays the application's.
    """
    from sqla_scheduler._bridge import check_backend
    from sqla_scheduler.worker import (
        WorkerError,
        WorkerInterrupted,
        configure_from_env,
        metrics_collectors,
        note_early_signals,
        run_worker,
    )

    note_early_signals()  # a SIGTERM while the application imports stops it cleanly
    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    scheduler = _load_app(spec)
    flags: dict[str, tuple[str, object]] = {}
    if concurrency is not None:
        flags["concurrency"] = ("--concurrency", concurrency)
    if name is not None:
        flags["scheduler_name"] = ("--name", name)
    try:
        from_env = configure_from_env(scheduler, ignore=_command_line_envvars())
        if flags:
            scheduler.config = scheduler.config.replace(
                **{key: value for key, (_flag, value) in flags.items()}
            )
    except ConfigurationError as exc:
        _fail(str(exc), 2)
    _log_environment(from_env, flags)
    try:
        check_backend(scheduler.engine, backend)
    except ImportError as exc:
        _fail(str(exc), 2)
    except RuntimeError:
        _fail(f"--backend trio needs a Scheduler with a sync Engine; {spec} has an AsyncEngine", 2)
    try:
        metrics_collectors(scheduler, collect_every)
    except ValueError as exc:
        _fail(f"--collect-metrics: {exc}", 2)
    try:
        with _database_errors(scheduler.engine.url):
            run_worker(
                scheduler,
                backend=backend,
                health_port=health_port,
                health_host=health_host,
                collect_every=collect_every,
            )
    except WorkerInterrupted as exc:
        click.echo(f"sqla-scheduler: {exc}", err=True)
        _exit_worker(128 + exc.signal.value)
    except WorkerError as exc:
        _fail(str(exc))
    _exit_worker(0)


def _log_environment(from_env: dict[str, str], flags: dict[str, tuple[str, object]]) -> None:
    """Say at start which settings the environment gave (and which an option overrode)."""
    from sqla_scheduler.worker import ENV_PREFIX

    context = click.get_current_context()
    shown = []
    for param in context.command.params:
        if context.get_parameter_source(param.name or "") is click.core.ParameterSource.ENVIRONMENT:
            envvar = param.envvar if isinstance(param.envvar, str) else "?"
            shown.append(f"{envvar}={os.environ.get(envvar, '')}")
    for name, value in from_env.items():
        flag = flags.get(name[len(ENV_PREFIX) :].lower())
        shown.append(f"{name}={value}" + (f" (overridden by {flag[0]})" if flag else ""))
    if shown:
        logging.getLogger("sqla_scheduler").info(
            "settings from the environment: %s", ", ".join(shown)
        )


def _exit_worker(status: int) -> NoReturn:
    """Exit without waiting for handler threads that outlived the scheduler.

    A sync handler still running when the scheduler stopped was released (graceful stop)
    or left for revival (forced stop); its thread must not keep the process alive.
    """
    others = [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread() and not t.daemon and t.is_alive()
    ]
    deadline = time.monotonic() + 1.0
    for thread in others:
        thread.join(max(0.0, deadline - time.monotonic()))
    lingering = sum(t.is_alive() for t in others)
    if lingering:
        logging.getLogger("sqla_scheduler").warning(
            "exiting without waiting for %d handler thread(s) still running", lingering
        )
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
