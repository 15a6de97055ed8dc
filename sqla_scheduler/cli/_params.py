"""The parameter types the commands share (whole numbers, durations, text a database can
store, identifiers, seconds, a task's name) and the options several commands take: --url,
--app, --read-url, --node-heartbeat-interval and --version-table."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypeVar

import click

from sqla_scheduler._limits import identifier_problem, text_problem
from sqla_scheduler.cli._errors import _fail
from sqla_scheduler.exceptions import ConfigurationError

Decorated = TypeVar("Decorated", bound=Callable[..., Any])

#: The prefix of the variables that set options, as of those that set a worker's config
#: keys (``worker.ENV_PREFIX``, which the commands do not import until they run).
_ENV_PREFIX = "SQLA_SCHEDULER_"
_URL_HELP = "Database URL, e.g. postgresql+psycopg://user@host/db (default: $DATABASE_URL)."


class _Whole(click.IntRange):
    """A whole number written in ASCII digits, from ``min`` to ``max`` (``int()`` also reads
    other scripts' digits, such as a full-width 5)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.isascii():
            self.fail(f"{value!r} is not a whole number in ASCII digits", param, ctx)
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter:
            self.fail(self.expected(value), param, ctx)

    def expected(self, value: object) -> str:
        """What is wrong with ``value``, saying what a good one is."""
        return f"{str(value)!r} is not a whole number from {self.min} to {self.max}"


class _Interval(click.ParamType[float]):
    """A duration such as ``15s`` or ``1m`` (a number alone is seconds), more than 0 and at
    most a day; its seconds."""

    name = "duration"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from sqla_scheduler._durations import parse_duration

        if isinstance(value, float):
            return value
        try:
            seconds = parse_duration(str(value)).total_seconds()
        except (ValueError, OverflowError):
            seconds = None
        if seconds is None or not 0 < seconds <= 86_400:
            self.fail(
                f"{str(value)!r} is not a duration above 0 and at most 1d, e.g. 15s", param, ctx
            )
        return seconds


class _Text(click.ParamType[str]):
    """Text a database can store: a name given as bytes that are not UTF-8 reaches Python
    as lone surrogates, which no driver sends."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        problem = text_problem(value) if isinstance(value, str) else None
        if problem is not None:
            self.fail(f"{value!r} {problem}", param, ctx)
        return value


_TEXT = _Text()


class _Identifier(click.ParamType[str]):
    """A table or schema name the steps take: letters, digits and underscores."""

    name = "identifier"

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        problem = identifier_problem(value, self.max_length)
        if problem is not None:
            self.fail(f"{value!r} {problem}", param, ctx)
        return value


class _Seconds(click.FloatRange):
    """A finite number of seconds written in ASCII, more than 0 and at most ``max``."""

    def __init__(self, max: float) -> None:
        super().__init__(min=0, min_open=True, max=max)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not value.isascii():
            self.fail(f"{value!r} is not a number in ASCII digits", param, ctx)
        try:
            number = super().convert(value, param, ctx)
        except click.BadParameter:
            number = None
        if number is None or number != number:  # NaN passes every comparison of the range
            self.fail(
                f"{str(value)!r} is not a number of seconds more than 0 and at most {self.max:g}",
                param,
                ctx,
            )
        return number


_url_option = click.option("--url", envvar="DATABASE_URL", required=True, help=_URL_HELP)

_APP_ENVVAR = _ENV_PREFIX + "APP"
"""Names the application's Scheduler (MODULE:ATTR) for every command that takes one."""


def _interval(ctx: click.Context, param: click.Parameter, value: str) -> timedelta:
    """``--node-heartbeat-interval`` read as the scheduler's config reads it: ``30s``, ``1m``."""
    from sqla_scheduler.config import SchedulerConfig

    try:
        config = SchedulerConfig.from_mapping({"node_heartbeat_interval": value})
    except ConfigurationError as exc:
        # the option names the key already
        message = str(exc).removeprefix("node_heartbeat_interval: ")
        raise click.BadParameter(message, ctx, param) from None
    return config.node_heartbeat_interval


_interval_option = click.option(
    "--node-heartbeat-interval",
    "interval",
    metavar="DURATION",
    callback=_interval,
    envvar="SQLA_SCHEDULER_NODE_HEARTBEAT_INTERVAL",
    default="30s",
    help="The node_heartbeat_interval to judge nodes by that do not record their own "
    "(rows written before the schema's step 11); a node is stale when not seen for three "
    "of its intervals. Default: $SQLA_SCHEDULER_NODE_HEARTBEAT_INTERVAL, else 30s.",
)


def _env_option(*decls: str, envvar: str, **attrs: Any) -> Callable[[Decorated], Decorated]:
    """``click.option(*decls, **attrs)`` that the variable ``SQLA_SCHEDULER_<envvar>`` sets
    too; the help names the variable, and the default where there is one."""
    return click.option(
        *decls, envvar=_ENV_PREFIX + envvar, show_envvar=True, show_default=True, **attrs
    )


def _version_table(read: str) -> Callable[[Decorated], Decorated]:
    """``--version-table``: the application's own Alembic version table, read ``read``."""
    return _env_option(
        "--version-table",
        type=_TEXT,
        metavar="NAME",
        default="alembic_version",
        envvar="VERSION_TABLE",
        help=f"Your own Alembic project's version table, read {read}",
    )


_read_url_option = _env_option(
    "--read-url",
    default=None,
    envvar="READ_URL",
    metavar="URL",
    help="Read from this database instead (a read replica): what it shows may lag behind "
    "the primary.",
)

_client_options = [
    click.option("--url", envvar="DATABASE_URL", help=f"{_URL_HELP[:-1]}, or --app's engine."),
    _env_option(
        "--app",
        "spec",
        metavar="MODULE:ATTR",
        envvar="APP",
        help="The application's Scheduler: its table, and its engine unless --url is given.",
    ),
]


def _with_client_options(command: Any) -> Any:
    for option in reversed(_client_options):
        command = option(command)
    return command


def _task_name(task_name: str) -> str:
    from sqla_scheduler._checks import check_task_name

    try:
        check_task_name(task_name)
    except ValueError as exc:
        _fail(str(exc), 2)
    return task_name
