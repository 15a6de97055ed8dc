"""``sqla-scheduler admin``: serve the admin page for the application's Scheduler (the admin
extra)."""

from __future__ import annotations

import importlib.util
import os
from typing import TYPE_CHECKING

import click
from sqlalchemy.exc import ArgumentError

from sqla_scheduler.cli._app import _load_app
from sqla_scheduler.cli._errors import _fail
from sqla_scheduler.cli._params import _APP_ENVVAR, _env_option, _Whole
from sqla_scheduler.cli._root import _command_line_envvars
from sqla_scheduler.exceptions import ConfigurationError

if TYPE_CHECKING:
    from sqla_scheduler.scheduler import Scheduler


_ADMIN_PACKAGES = ("starlette", "uvicorn", "jinja2")


def _missing_admin_packages() -> list[str]:
    return [name for name in _ADMIN_PACKAGES if importlib.util.find_spec(name) is None]


@click.command("admin")
@click.argument("spec", metavar="MODULE:ATTR", envvar=_APP_ENVVAR)
@_env_option(
    "--host",
    default="127.0.0.1",
    envvar="ADMIN_HOST",
    help="Interface to listen on.",
)
@_env_option(
    "--port",
    type=_Whole(1, 65535),
    default=8080,
    envvar="ADMIN_PORT",
    help="Port to listen on.",
)
@_env_option(
    "--actions/--read-only",
    default=False,
    envvar="ADMIN_ACTIONS",
    help="Offer run now, retry, delete, requeue, pause and resume buttons (off: the page "
    "only reads).",
)
@_env_option(
    "--read-url",
    default=None,
    envvar="READ_URL",
    metavar="URL",
    help="Read the pages from this database (a read replica of the application's): "
    "actions still write to the application's engine, and the header shows the "
    "replica's lag.",
)
def admin(spec: str, host: str, port: int, actions: bool, read_url: str | None) -> None:
    """Serve the admin page for the Scheduler at MODULE:ATTR at /admin/jobs.

    It shows registered tasks, recurring tasks, running, failing and orphaned executions,
    history and dead letters, paused tasks and nodes, behind HTTP Basic auth: the user is
    ADMIN_USER (default admin), the password ADMIN_PASSWORD, which has no default. Needs
    the admin extra:
    pip install 'sqla-scheduler[admin]'.

    MODULE:ATTR defaults to $SQLA_SCHEDULER_APP. SQLA_SCHEDULER_<KEY> variables set the
    scheduler's config keys as for the worker (SQLA_SCHEDULER_NODE_HEARTBEAT_INTERVAL=1m),
    so that the page judges nodes and history as the workers run them.
    """
    scheduler = _load_app(spec)
    missing = _missing_admin_packages()
    if missing:
        _fail(f"the admin page needs {', '.join(missing)}: install sqla-scheduler[admin]")
    if read_url is not None:
        scheduler = _reading_from(scheduler, read_url)
    from sqla_scheduler.admin import credentials_from_env, serve
    from sqla_scheduler.worker import configure_from_env

    try:
        username, password = credentials_from_env(os.environ)
        # judged as the workers judge: their node_heartbeat_interval, history setting, ...
        configure_from_env(scheduler, ignore=_command_line_envvars())
    except ConfigurationError as exc:
        _fail(str(exc), 2)
    click.echo(f"sqla-scheduler: admin page on http://{host}:{port}/admin/jobs/", err=True)
    serve(scheduler, host=host, port=port, username=username, password=password, actions=actions)


def _reading_from(scheduler: Scheduler, read_url: str) -> Scheduler:
    """``scheduler`` with ``read_url``'s engine as its ``read_engine`` (sync or async as
    its own engine is)."""
    from sqlalchemy import create_engine
    from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

    from sqla_scheduler._dialects import check_url, sync_url

    try:
        url = check_url(read_url)
    except ArgumentError as exc:
        _fail(f"bad --read-url {read_url}: {exc}", 2)
    sync = not isinstance(scheduler.engine, AsyncEngine)
    try:
        scheduler.read_engine = create_engine(sync_url(url)) if sync else create_async_engine(url)
    except TypeError as exc:  # another database system
        _fail(f"--read-url: {exc}", 2)
    return scheduler
