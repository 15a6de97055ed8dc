"""The ``sqla-scheduler`` command: a thin layer over public functions."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import click
from sqlalchemy.exc import ArgumentError, OperationalError

from sqla_scheduler import migrate

__all__ = ["cli", "main"]

_url_option = click.option(
    "--url",
    envvar="DATABASE_URL",
    required=True,
    help="Database URL, e.g. postgresql+psycopg://user@host/db (default: $DATABASE_URL).",
)


@contextmanager
def _database_errors(url: str) -> Iterator[None]:
    """Turn the usual database failures into one line on stderr and exit code 1."""
    try:
        yield
    except ArgumentError as exc:
        _fail(f"bad database URL {url!r}: {exc}")
    except OperationalError as exc:
        _fail(f"cannot reach the database: {str(exc.orig).strip()}")


def _fail(message: str, status: int = 1) -> None:
    """One line on stderr, then exit with ``status`` (1: runtime failure, 2: bad usage)."""
    click.echo(f"sqla-scheduler: {_one_line(message)}", err=True)
    sys.exit(status)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """sqla-scheduler: a persistent, cluster-safe task scheduler for SQLAlchemy apps."""


@cli.group()
def db() -> None:
    """Create, upgrade or inspect the scheduler's table (its own migrations)."""


@db.command("upgrade")
@_url_option
@click.argument("revision", default="heads")
def db_upgrade(url: str, revision: str) -> None:
    """Upgrade the scheduler's table to REVISION (default: heads)."""
    with _database_errors(url):
        migrate.upgrade(url, revision)
        click.echo(f"upgraded to {', '.join(migrate.current(url)) or 'base'}")


@db.command("downgrade")
@_url_option
@click.argument("revision")
def db_downgrade(url: str, revision: str) -> None:
    """Downgrade the scheduler's table to REVISION ("base" drops it)."""
    with _database_errors(url):
        migrate.downgrade(url, revision)
        click.echo(f"downgraded to {', '.join(migrate.current(url)) or 'base'}")


@db.command("current")
@_url_option
def db_current(url: str) -> None:
    """Show the revision the scheduler's table is at."""
    with _database_errors(url):
        revisions = migrate.current(url)
    heads = set(migrate.heads())
    for revision in revisions or ("base",):
        click.echo(f"{revision}{' (head)' if revision in heads else ''}")


_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@cli.command("worker")
@click.argument("spec", metavar="MODULE:ATTR")
@click.option(
    "--concurrency",
    type=click.IntRange(min=1),
    help="Executions run in parallel (default: the scheduler's config).",
)
@click.option("--name", help="Scheduler name written to picked_by (default: the config's).")
@click.option(
    "--backend",
    type=click.Choice(["asyncio", "trio"]),
    default="asyncio",
    show_default=True,
    help="anyio backend; trio needs a sync Engine.",
)
@click.option(
    "--log-level",
    type=click.Choice(_LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    help="Level of the log written to stderr.",
)
def worker(
    spec: str, concurrency: int | None, name: str | None, backend: str, log_level: str
) -> None:
    """Run the Scheduler at MODULE:ATTR until SIGINT or SIGTERM.

    ATTR may be dotted (app.scheduler) and may name a factory that returns a Scheduler.
    The first signal stops gracefully (running executions get shutdown_max_wait), a second
    one at once. Exit status: 0 after a graceful stop, 1 when the worker fails, 2 for a
    bad MODULE:ATTR or option, 128 + the signal number after a forced stop.
    """
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.ext.asyncio import AsyncEngine

    from sqla_scheduler.exceptions import ConfigurationError
    from sqla_scheduler.worker import WorkerError, WorkerInterrupted, load_scheduler, run_worker

    logging.basicConfig(
        level=log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Like other app runners, import the application from the working directory.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        scheduler = load_scheduler(spec)
        changes: dict[str, object] = {}
        if concurrency is not None:
            changes["concurrency"] = concurrency
        if name is not None:
            changes["scheduler_name"] = name
        if changes:
            scheduler.config = scheduler.config.replace(**changes)
    except (WorkerError, ConfigurationError) as exc:
        _fail(str(exc), 2)
        return
    if backend == "trio" and isinstance(scheduler.engine, AsyncEngine):
        _fail(f"--backend trio needs a Scheduler with a sync Engine; {spec} has an AsyncEngine", 2)
    try:
        run_worker(scheduler, backend=backend)
    except WorkerInterrupted as exc:
        click.echo(f"sqla-scheduler: {exc}", err=True)
        _exit_worker(128 + exc.signal.value)
    except WorkerError as exc:
        _fail(str(exc), 1)
    except OperationalError as exc:
        _fail(f"cannot reach the database: {_one_line(exc.orig or exc)}", 1)
    except DBAPIError as exc:
        _fail(f"database error: {_one_line(exc.orig or exc)}", 1)
    _exit_worker(0)


def _one_line(error: object) -> str:
    return " ".join(str(error).split())


def _exit_worker(status: int) -> None:
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


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="sqla-scheduler")
