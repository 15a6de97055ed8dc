"""The application a command works on: the Scheduler at MODULE:ATTR, the database a command
reads (--url, --app's engine, or --read-url), and the ``SQLA_SCHEDULER_*`` config keys of
the environment."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

from sqla_scheduler.cli._errors import _fail
from sqla_scheduler.cli._root import _command_line_envvars
from sqla_scheduler.exceptions import ConfigurationError

if TYPE_CHECKING:
    from sqla_scheduler.config import SchedulerConfig
    from sqla_scheduler.scheduler import Scheduler


def _load_app(spec: str) -> Scheduler:
    """The application's Scheduler at MODULE:ATTR, or one line on stderr and an exit.

    A malformed spec, a module that is not there or an attribute that is no scheduler is bad
    usage (2); an application that raises while it is imported is a runtime failure (1).
    """
    from sqla_scheduler.worker import WorkerError, load_scheduler

    # Like other app runners, import the application from the working directory.
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return load_scheduler(spec)
    except (WorkerError, ConfigurationError) as exc:
        _fail(str(exc), 2)
    except Exception as exc:
        module = spec.partition(":")[0]
        _fail(
            f"cannot load {spec}: {type(exc).__name__}: {exc} "
            f"(`python -c 'import {module}'` shows the traceback)"
        )


def _client_url(
    url: str | None, spec: str | None, read_url: str | None = None
) -> tuple[str | None, Scheduler | None]:
    """The database to read and the application's scheduler, from --url and --app (and
    --read-url, which wins where a command reads)."""
    scheduler = _load_app(spec) if spec is not None else None
    if read_url is not None:
        return read_url, scheduler
    source = click.get_current_context().get_parameter_source("url")
    if scheduler is not None and source is not click.core.ParameterSource.COMMANDLINE:
        return None, scheduler  # the application's own engine
    if url is None:
        _fail("no database: give --url URL, set DATABASE_URL, or give --app MODULE:ATTR", 2)
    return url, scheduler


def _config_from_env() -> SchedulerConfig:
    """The ``SQLA_SCHEDULER_*`` config keys of the environment, as a worker reads them: an
    unknown name or a bad value exits 2 saying so (the commands' own variables aside)."""
    from sqla_scheduler.config import SchedulerConfig

    own = _command_line_envvars()
    environ = {key: value for key, value in os.environ.items() if key not in own}
    try:
        return SchedulerConfig.from_env(environ=environ)
    except ConfigurationError as exc:
        _fail(str(exc), 2)
