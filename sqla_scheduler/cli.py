"""The ``sqla-scheduler`` command: a thin layer over public functions.

Exit status, for every command: 0 on success, 2 for bad usage (an unknown option, a bad
MODULE:ATTR or database URL), 1 when the work itself fails (an unreachable database, a
missing table, an application that raises on import). Failures print one line on stderr,
``sqla-scheduler: <what went wrong>``, never a traceback.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
from sqlalchemy import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError

from sqla_scheduler._limits import (
    BIGINT_MAX,
    MAX_CONCURRENCY,
    MAX_SCHEMA_NAME_LENGTH,
    MAX_TABLE_NAME_LENGTH,
    identifier_problem,
    text_problem,
)
from sqla_scheduler.exceptions import ConfigurationError, MissingTableError, UnknownStepError

if TYPE_CHECKING:
    from sqla_scheduler import migrate
    from sqla_scheduler.config import SchedulerConfig
    from sqla_scheduler.executions import Execution
    from sqla_scheduler.health import Health
    from sqla_scheduler.nodes import Node
    from sqla_scheduler.results import Result
    from sqla_scheduler.scheduler import Scheduler

__all__ = ["cli", "main"]

T = TypeVar("T")
Decorated = TypeVar("Decorated", bound=Callable[..., Any])

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


class _HistoryId(_Whole):
    """The id of a history entry: the number ``sqla-scheduler history`` lists first."""

    def __init__(self) -> None:
        super().__init__(1, BIGINT_MAX)

    def expected(self, value: object) -> str:
        return (
            f"{str(value)!r} is not the id of a history entry: give the number "
            "`sqla-scheduler history` lists in its id column, e.g. `sqla-scheduler requeue 42`"
        )


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

_APP_ENVVAR = "SQLA_SCHEDULER_APP"
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


def _fail(message: str, status: int = 1) -> NoReturn:
    """One line on stderr, then exit with ``status`` (1: runtime failure, 2: bad usage)."""
    click.echo(f"sqla-scheduler: {_one_line(message)}", err=True)
    sys.exit(status)


def _one_line(error: object) -> str:
    return " ".join(str(error).split())


def _shown(url: object) -> str:
    """``url`` for a message, its password hidden when it parses."""
    try:
        return make_url(str(url)).render_as_string(hide_password=True)
    except ArgumentError:
        return repr(url)


@contextmanager
def _database_errors(url: object = None) -> Iterator[None]:
    """Turn the usual database failures into one line on stderr and the exit status.

    A URL that does not parse or names a database the scheduler does not run on is bad
    usage (2): every URL is checked before any driver is imported (``_dialects.check_url``,
    which also says ``postgresql://`` for ``postgres://``); a missing driver, an unreachable
    database, a missing table or any other database error is a runtime failure (1).
    """
    try:
        yield
    except ArgumentError as exc:  # NoSuchModuleError and UnsupportedDatabaseError are too
        where = f" {_shown(url)}" if url is not None else ""
        _fail(f"bad database URL{where}: {exc}", 2)
    except NotImplementedError as exc:  # an application's engine on such a database
        _fail(str(exc), 2)
    except ModuleNotFoundError as exc:
        _fail(f"cannot load the database driver: {exc}")
    except (MissingTableError, UnknownStepError) as exc:
        _fail(str(exc))
    except OperationalError as exc:
        # With no statement, the error came from connecting.
        if exc.statement is None:
            _fail(f"cannot reach the database: {_one_line(exc.orig or exc)}")
        _fail(f"database error: {_one_line(exc.orig or exc)}")
    except DBAPIError as exc:
        _fail(f"database error: {_one_line(exc.orig or exc)}")


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


class _Group(click.Group):
    """A group of commands that lists each with the whole first sentence of its help (click
    cuts it to fit one line, mid-sentence), and answers a value an option or argument does
    not take in one line that says what it takes."""

    group_class = type  # db and alembic are such groups too

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (name, command.get_short_help_str(limit=sys.maxsize))
            for name in self.list_commands(ctx)
            if (command := self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.MissingParameter:
            raise  # click's usage line is the best answer: it shows what is missing
        except click.BadParameter as exc:
            _fail(_bad_value(exc), 2)


def _bad_value(exc: click.BadParameter) -> str:
    """``COMMAND OPTION: 'VALUE' is not ...``, and the variable the value came from."""
    param, ctx = exc.param, exc.ctx
    message = exc.message.rstrip(".")
    if param is None or ctx is None:
        return message
    names = []
    at: click.Context | None = ctx
    while at is not None and at.parent is not None:  # the root is the program's name
        names.append(at.info_name or "")
        at = at.parent
    if isinstance(param, click.Option):
        flag = next((opt for opt in param.opts if opt.startswith("--")), param.opts[0])
    else:
        flag = param.human_readable_name.strip("[].")
    where = " ".join([*reversed(names), flag])
    source = ctx.get_parameter_source(param.name or "")
    if source is click.core.ParameterSource.ENVIRONMENT:
        envvars = [param.envvar] if isinstance(param.envvar, str) else param.envvar or []
        found = next((name for name in envvars if name in os.environ), None)
        if found is not None:
            message += f" (read from {found})"
    return f"{where}: {message}"


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sqla-scheduler", prog_name="sqla-scheduler")
def cli() -> None:
    """sqla-scheduler: a persistent, cluster-safe task scheduler for SQLAlchemy apps.

    Commands that need a database take --url, or read DATABASE_URL. Exit status: 0 on
    success, 2 for bad usage, 1 when the work fails (one line on stderr says why).
    """


# --- db ---------------------------------------------------------------------------------


@cli.group()
def db() -> None:
    """Create, upgrade or inspect the scheduler's table (its own migrations)."""


def _version_table(read: str) -> Callable[[Decorated], Decorated]:
    """``--version-table``: the application's own Alembic version table, read ``read``."""
    return click.option(
        "--version-table",
        type=_TEXT,
        metavar="NAME",
        default="alembic_version",
        show_default=True,
        envvar="SQLA_SCHEDULER_VERSION_TABLE",
        show_envvar=True,
        help=f"Your own Alembic project's version table, read {read}",
    )


_version_table_option = _version_table("to tell which way manages the scheduler's tables.")


@db.command("upgrade")
@_url_option
@_version_table_option
@click.argument("revision", default="heads")
def db_upgrade(url: str, version_table: str, revision: str) -> None:
    """Upgrade the scheduler's table to REVISION (default: heads), creating it if needed.

    Refused for tables that your Alembic project manages (its own history or the
    sqla_scheduler branch): upgrade those there."""
    from sqla_scheduler import migrate

    with _database_errors(url), _revision_errors("upgrade", revision):
        _refuse_managed_elsewhere(migrate.status(url, version_table=version_table), "upgrade")
        migrate.upgrade(url, revision)
        click.echo(f"upgraded to {', '.join(migrate.current(url)) or 'base'}")


@db.command("downgrade")
@_url_option
@_version_table_option
@click.argument("revision")
def db_downgrade(url: str, version_table: str, revision: str) -> None:
    """Downgrade the scheduler's table to REVISION ("base" drops it).

    Refused for tables that your Alembic project manages: downgrade those there."""
    from sqla_scheduler import migrate

    with _database_errors(url), _revision_errors("downgrade", revision):
        _refuse_managed_elsewhere(migrate.status(url, version_table=version_table), "downgrade")
        migrate.downgrade(url, revision)
        click.echo(f"downgraded to {', '.join(migrate.current(url)) or 'base'}")


@contextmanager
def _revision_errors(verb: str, revision: str) -> Iterator[None]:
    """A REVISION that names no revision of the package's migrations is bad usage: one line
    saying what it takes (a step number, as ``db current`` counts, gets its revision)."""
    from alembic.util import CommandError

    from sqla_scheduler._migration_steps import LATEST, STEP_OF_REVISION

    try:
        yield
    except CommandError as exc:
        if f"'{revision}'" not in str(exc):  # about the database's revision, not this one
            _fail(f"db {verb}: {exc}")
        where = f"db {verb} REVISION: {revision!r}"
        of_step = {step: rev for rev, step in STEP_OF_REVISION.items()}
        if revision.isascii() and revision.isdigit() and int(revision) <= LATEST:
            step = int(revision)
            target = of_step[step] if step else "base"
            _fail(
                f"{where} is a step, not a revision: step {step} is "
                f"{f'revision {target}' if step else 'base'} "
                f"(sqla-scheduler db {verb} {target})",
                2,
            )
        takes = "heads (the newest step)" if verb == "upgrade" else "base (no tables)"
        _fail(
            f"{where} is not a revision of the scheduler's migrations: give {takes} or a "
            f"revision id, such as {of_step[LATEST]} for step {LATEST}",
            2,
        )


def _refuse_managed_elsewhere(status: migrate.Status, verb: str) -> None:
    """One line and exit 1 when an Alembic project manages the tables, not ``db``."""
    if status.way == "application":
        _fail(
            f"the scheduler's tables are at step {status.step} through your application's "
            f"own Alembic history: {verb} them there (sqla-scheduler alembic revision, then "
            f"alembic {verb} head), not with sqla-scheduler db {verb}"
        )
    if status.way == "branch":
        _fail(
            f"the scheduler's tables are at step {status.step} through the sqla_scheduler "
            f"branch of your Alembic project (revision {status.revision}): {verb} them there "
            f"(alembic {verb} {'heads' if verb == 'upgrade' else 'sqla_scheduler@-1'}), not "
            f"with sqla-scheduler db {verb}"
        )


@db.command("adopt")
@_url_option
@_version_table_option
def db_adopt(url: str, version_table: str) -> None:
    """Hand the scheduler's tables over to your application's own Alembic history, from
    db upgrade or the sqla_scheduler branch, keeping every row.

    Records the step the tables are at beside them and takes the scheduler's revisions out
    of the version tables; the tables are not touched. First take
    sqla_scheduler:migrations/versions out of version_locations; afterwards run
    sqla-scheduler alembic revision and alembic upgrade head (which then changes nothing)."""
    from sqla_scheduler import migrate

    with _database_errors(url):
        before, after = migrate.adopt(url, version_table=version_table)
    if before == after:
        click.echo(f"nothing to hand over: {after.describe(version_table)}")
        return
    click.echo(f"was {before.describe(version_table)}")
    click.echo(f"now {after.describe(version_table)}")


@db.command("current")
@_url_option
@_version_table_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object with every field.")
def db_current(url: str, version_table: str, as_json: bool) -> None:
    """Show the step the scheduler's tables are at, and which way manages them (this
    command's db upgrade, the sqla_scheduler branch of your Alembic project, or your
    application's own Alembic history)."""
    from sqla_scheduler import migrate

    with _database_errors(url):
        status = migrate.status(url, version_table=version_table)
    if as_json:
        click.echo(json.dumps(_status_json(status, version_table), indent=2))
        return
    click.echo(status.describe(version_table))


def _status_json(status: migrate.Status, version_table: str) -> dict[str, Any]:
    from sqla_scheduler import migrate

    where = {"standalone": migrate.VERSION_TABLE, "branch": version_table}
    return {
        "step": status.step,
        "latest": status.latest,
        "way": status.way,
        "revision": status.revision,
        "version_table": where.get(status.way),
    }


# --- alembic ----------------------------------------------------------------------------


@cli.group("alembic")
def alembic_group() -> None:
    """Bring the scheduler's tables into the application's own Alembic history."""


@alembic_group.command("revision")
@click.option(
    "-c",
    "--config",
    "config_file",
    metavar="FILE",
    default="alembic.ini",
    show_default=True,
    help="The application's Alembic config file.",
)
@click.option(
    "-m",
    "--message",
    metavar="MESSAGE",
    help='The revision\'s message (default: "sqla-scheduler: step P to N").',
)
@click.option(
    "--table-name",
    type=_Identifier(MAX_TABLE_NAME_LENGTH),
    metavar="NAME",
    default="scheduled_tasks",
    show_default=True,
    help="The scheduler's table (its table_name); the others are named after it.",
)
@click.option(
    "--schema",
    type=_Identifier(MAX_SCHEMA_NAME_LENGTH),
    metavar="SCHEMA",
    help="The tables' schema (its schema).",
)
@click.option(
    "--version",
    type=_Whole(1, BIGINT_MAX),
    metavar="N",
    help="The step to bring the tables to (default: the package's newest).",
)
def alembic_revision(
    config_file: str, message: str | None, table_name: str, schema: str | None, version: int | None
) -> None:
    """Write a revision on the application's head that brings the scheduler's tables to
    the package's newest step (or --version N).

    Its upgrade() calls sqla_scheduler.alembic.upgrade(op, version=N), from the step the
    history already brings the tables to, read from the revision files' calls; after a
    library upgrade it holds only the new steps. When the history is at N already, it
    writes nothing. The history must have one head (alembic merge heads first).
    """
    from sqla_scheduler._app_history import HistoryError, write_revision
    from sqla_scheduler.alembic import LATEST

    if version is None:
        version = LATEST
    elif version > LATEST:
        _fail(f"--version {version}: this package's newest step is {LATEST}", 2)
    try:
        written = write_revision(
            config_file, version=version, message=message, table_name=table_name, schema=schema
        )
    except HistoryError as exc:
        _fail(str(exc), 2 if exc.usage else 1)
    tables = f"{schema}.{table_name}" if schema is not None else table_name
    if written.path is None:
        click.echo(
            f"nothing to write: {_near(written.found_in)} brings {tables} to step {version} already"
        )
        return
    click.echo(f"wrote {_near(written.path)}: {tables} from step {written.start} to {version}")


def _near(path: object) -> object:
    """``path`` relative to the current directory when it is inside it, as typed."""
    if not isinstance(path, (str, os.PathLike)):
        return path
    full = os.path.abspath(path)
    here = os.getcwd()
    return os.path.relpath(full, here) if full.startswith(here + os.sep) else path


# --- health -----------------------------------------------------------------------------


@cli.command("health")
@_url_option
@_version_table(
    "when sqla-scheduler db upgrade's (sqla_scheduler_alembic_version) records nothing."
)
@click.option(
    "--name",
    type=_TEXT,
    metavar="NAME",
    envvar="SQLA_SCHEDULER_SCHEDULER_NAME",
    show_envvar=True,
    help="Also require the scheduler named NAME (its scheduler_name) to be alive: recorded "
    "in the nodes table within three node heartbeat intervals. Beside a worker whose name "
    "SQLA_SCHEDULER_SCHEDULER_NAME sets, the probe checks that worker.",
)
@_interval_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON object with every field, healthy or not (the exit status is the same).",
)
def health(
    url: str, version_table: str, name: str | None, interval: timedelta, as_json: bool
) -> None:
    """Check that the database is reachable and its schema at a step this version runs on
    (its newest, or past it) and, with --name, that the scheduler of that name is alive.

    For readiness probes and deploy scripts: exit 0, printing what was found, or 1 with one
    line on stderr saying why not (unreachable, no table, the schema behind this version's
    newest step, no such scheduler, or one last seen too long ago). Steps are counted as
    db current counts them. SQLA_SCHEDULER_* variables are read as a worker reads them
    (SQLA_SCHEDULER_TABLE_NAME and _SCHEMA name the table checked); an unknown name exits
    2. For liveness, use the worker's --health-port and GET /livez, which does not ask the
    database.
    """
    from sqla_scheduler.health import check

    config = _config_from_env()
    with _database_errors(url):
        found = check(
            url,
            version_table=version_table,
            name=name,
            node_heartbeat_interval=interval,
            table_name=config.table_name,
            schema=config.schema,
        )
    if as_json:
        click.echo(json.dumps(_health_json(found), indent=2))
        sys.exit(0 if found.healthy else 1)
    if not found.healthy:
        _fail(found.reason)
    click.echo(found.reason)


def _health_json(found: Health) -> dict[str, Any]:
    return {
        "healthy": found.healthy,
        "reason": found.reason,
        "step": found.step,
        "latest": found.latest,
        "version_table": found.version_table,
        "current": list(found.current),
        "heads": list(found.heads),
        "node": None if found.node is None else found.node.to_json(),
    }


# --- executions -------------------------------------------------------------------------

_STATES = ("all", "scheduled", "due", "running", "failing", "orphaned")

_read_url_option = click.option(
    "--read-url",
    default=None,
    envvar="SQLA_SCHEDULER_READ_URL",
    show_envvar=True,
    metavar="URL",
    help="Read from this database instead (a read replica): what it shows may lag behind "
    "the primary.",
)


@cli.command("executions")
@click.option("--url", envvar="DATABASE_URL", help=f"{_URL_HELP[:-1]}, or --app's engine.")
@click.option(
    "--state",
    type=click.Choice(_STATES),
    default="all",
    show_default=True,
    help="Which executions: scheduled (not running), due, running, failing (latest failure "
    "first), orphaned (task not registered in --app), or all.",
)
@click.option(
    "--task", "task_name", type=_TEXT, metavar="NAME", help="Only executions of this task."
)
@click.option(
    "--limit",
    type=_Whole(1, BIGINT_MAX),
    default=100,
    show_default=True,
    help="List at most N executions.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list with every field.")
@click.option(
    "--app",
    "spec",
    metavar="MODULE:ATTR",
    envvar=_APP_ENVVAR,
    show_envvar=True,
    help="The application's Scheduler: its table and registered tasks are used (needed for "
    "--state orphaned), and its engine unless --url is given.",
)
@_read_url_option
def executions(
    url: str | None,
    state: str,
    task_name: str | None,
    limit: int,
    as_json: bool,
    spec: str | None,
    read_url: str | None,
) -> None:
    """List scheduled executions: what is due, running, failing or orphaned.

    Prints a table (task, instance, execution time in UTC, state, picked by, heartbeat age,
    consecutive failures, priority, the first line of the last error), or with --json every
    field of each execution, the last error's full text and traceback among them. A group's
    callback that waits for its members is "waiting", with no execution time.
    """
    from sqla_scheduler.executions import list_executions

    if state == "orphaned" and spec is None:
        _fail(
            "--state orphaned needs --app MODULE:ATTR: only the application's scheduler "
            "knows which tasks are registered",
            2,
        )
    url, scheduler = _client_url(url, spec, read_url)
    with _database_errors(url):
        found = list_executions(
            url,
            state,  # type: ignore[arg-type]  # one of _STATES
            scheduler=scheduler,
            task_name=task_name,
            limit=limit + 1,  # one more tells whether there are more
        )
    more, found = len(found) > limit, found[:limit]
    if as_json:
        click.echo(json.dumps([e.to_json() for e in found], indent=2))
    else:
        known = frozenset(scheduler.tasks) if scheduler is not None else None
        _print_executions(found, known)
        if more:
            click.echo(f"(only the first {limit} are shown; raise --limit to see more)", err=True)
    if not found and task_name is not None:
        _say_which_tasks_have_executions(url, scheduler, task_name)


#: The most task names the note on a task without executions lists.
_TASK_NAMES_SHOWN = 20


def _say_which_tasks_have_executions(
    url: str | None, scheduler: Scheduler | None, task_name: str
) -> None:
    """On stderr, when ``task_name`` has no execution at all (a typo, most often): say so,
    and name the tasks that have some."""
    from sqla_scheduler import _store
    from sqla_scheduler.executions import connected

    with _database_errors(url), connected(url, scheduler) as (client, conn):
        if client.executions(conn, task_name=task_name, limit=1):
            return  # it has executions, none in the state asked for
        names = _store.seen_task_names(conn, client.table, limit=_TASK_NAMES_SHOWN + 1)
    note = f"sqla-scheduler: no execution of task {task_name!r} exists"
    if not names:
        click.echo(f"{note}, nor of any other task", err=True)
        return
    shown = ", ".join(names[:_TASK_NAMES_SHOWN])
    if len(names) > _TASK_NAMES_SHOWN:
        shown += f" (the first {_TASK_NAMES_SHOWN} by name)"
    click.echo(f"{note}; tasks with executions: {shown}", err=True)


def _print_executions(found: list[Execution], known: frozenset[str] | None) -> None:
    now = datetime.now(timezone.utc)
    _print_table(
        [
            ("task", "left"),
            ("instance", "left"),
            ("execution time (UTC)", "left"),
            ("state", "left"),
            ("picked by", "left"),
            ("heartbeat age", "right"),
            ("failures", "right"),
            ("priority", "right"),
            ("last error", "left"),
        ],
        (
            [
                e.task_name,
                e.instance_id,
                "-" if e.waiting else _utc(e.execution_time),
                _state(e, now, known),
                e.picked_by or "-",
                _age(now - e.last_heartbeat) if e.picked and e.last_heartbeat else "-",
                str(e.consecutive_failures),
                str(e.priority),
                _error_line(e.last_error),
            ]
            for e in found
        ),
        empty="no executions",
    )


def _state(e: Execution, now: datetime, known: frozenset[str] | None) -> str:
    """``Execution.status``: ``waiting`` for a group's callback that waits for its
    members, whose execution time is a placeholder in year 9999, not a time it will run."""
    return e.status(now, known)


def _print_table(columns: list[tuple[str, str]], rows: Iterable[list[str]], *, empty: str) -> None:
    """A table with ``columns`` (header, justification) of ``rows``, each cell shown as
    written (no rich markup in names, ids or error text is interpreted); ``empty`` when
    there are no rows."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for header, justify in columns:
        table.add_column(header, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(Text(cell) for cell in row))
    if not table.row_count:
        click.echo(empty)
        return
    console = Console()
    if not console.is_terminal:
        # Piped or captured: never squeeze or cut columns to fit 80 characters.
        console = Console(width=100_000)
    console.print(table)


#: The most characters of an error's first line the table shows.
_ERROR_LINE = 80


def _error_line(error: str | None) -> str:
    """The first line of an error text (its type and message), cut to ``_ERROR_LINE``."""
    if not error:
        return "-"
    line = error.splitlines()[0]
    return line if len(line) <= _ERROR_LINE else f"{line[: _ERROR_LINE - 1]}…"


def _age(delta: Any) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


# --- history ----------------------------------------------------------------------------

_OUTCOMES = ("succeeded", "failed", "abandoned", "dead", "undecodable")


def _since(value: str | None) -> datetime | None:
    """``--since``: a duration back from now (``1h``, ``2d``) or an ISO date and time (UTC
    when it names no offset)."""
    from sqla_scheduler._durations import parse_duration

    if value is None:
        return None
    try:
        return datetime.now(timezone.utc) - parse_duration(value)
    except (ValueError, OverflowError):
        pass
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        _fail(f"--since: {value!r} is neither a duration such as 1h nor an ISO date and time", 2)
    return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)


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


_client_options = [
    click.option("--url", envvar="DATABASE_URL", help=f"{_URL_HELP[:-1]}, or --app's engine."),
    click.option(
        "--app",
        "spec",
        metavar="MODULE:ATTR",
        envvar=_APP_ENVVAR,
        show_envvar=True,
        help="The application's Scheduler: its table, and its engine unless --url is given.",
    ),
]


def _with_client_options(command: Any) -> Any:
    for option in reversed(_client_options):
        command = option(command)
    return command


@cli.command("history")
@_with_client_options
@click.option("--task", "task_name", type=_TEXT, metavar="NAME", help="Only entries of this task.")
@click.option(
    "--instance", "instance_id", type=_TEXT, metavar="ID", help="Only entries of this instance."
)
@click.option("--outcome", type=click.Choice(_OUTCOMES), help="Only entries with this outcome.")
@click.option(
    "--since",
    metavar="WHEN",
    help="Only entries finished since WHEN: a duration back from now (1h, 2d) or an ISO "
    "date and time (UTC unless it names an offset).",
)
@click.option(
    "--limit", type=_Whole(1, BIGINT_MAX), default=100, show_default=True, help="At most N."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list with every field.")
@_read_url_option
def history(
    url: str | None,
    spec: str | None,
    task_name: str | None,
    instance_id: str | None,
    outcome: str | None,
    since: str | None,
    limit: int,
    as_json: bool,
    read_url: str | None,
) -> None:
    """List finished attempts from the history table, newest first.

    What is there depends on the scheduler's `history` setting: failures (the default:
    failed, abandoned, dead and undecodable attempts), all (successes too) or none.
    Abandoned and undecodable entries keep their payload: `requeue ID` runs them again.
    """
    from sqla_scheduler.history import list_history

    after = _since(since)
    db_url, scheduler = _client_url(url, spec, read_url)
    with _database_errors(db_url):
        found = list_history(
            db_url,
            scheduler=scheduler,
            task_name=task_name,
            instance_id=instance_id,
            outcome=outcome,  # type: ignore[arg-type]  # one of _OUTCOMES
            since=after,
            limit=limit + 1,  # one more tells whether there are more
        )
    more, found = len(found) > limit, found[:limit]
    if as_json:
        click.echo(json.dumps([_entry_json(e) for e in found], indent=2))
        return
    _print_history(found)
    if more:
        click.echo(f"(only the newest {limit} are shown; raise --limit to see more)", err=True)


def _entry_json(entry: Any) -> dict[str, Any]:
    def when(at: datetime | None) -> str | None:
        return None if at is None else at.isoformat()

    duration = entry.duration
    return {
        "id": entry.id,
        "task_name": entry.task_name,
        "instance_id": entry.instance_id,
        "outcome": entry.outcome,
        "execution_time": when(entry.execution_time),
        "started_at": when(entry.started_at),
        "finished_at": when(entry.finished_at),
        "duration_seconds": None if duration is None else duration.total_seconds(),
        "picked_by": entry.picked_by,
        "attempt": entry.attempt,
        "priority": entry.priority,
        "payload_version": entry.payload_version,
        "error": entry.error,
        "data": entry.data,
    }


def _print_history(found: list[Any]) -> None:
    _print_table(
        [
            ("id", "right"),
            ("task", "left"),
            ("instance", "left"),
            ("outcome", "left"),
            ("finished (UTC)", "left"),
            ("took", "right"),
            ("attempt", "right"),
            ("picked by", "left"),
            ("error", "left"),
        ],
        (
            [
                str(e.id),
                e.task_name,
                e.instance_id,
                e.outcome,
                _utc(e.finished_at),
                "-" if e.duration is None else f"{e.duration.total_seconds():.3f}s",
                str(e.attempt),
                e.picked_by or "-",
                _error_line(e.error),
            ]
            for e in found
        ),
        empty="no history entries",
    )


@cli.command("requeue")
@click.argument("history_id", metavar="ID", type=_HistoryId())
@_with_client_options
def requeue(history_id: int, url: str | None, spec: str | None) -> None:
    """Schedule an abandoned or undecodable execution again, due now, with its payload.

    ID is the number `history` lists. The entry stays in history; the execution runs as
    a new one (its failures counted from zero). Exits 1, saying why, when there is no such
    entry, it is of another outcome, or an execution with its key is already scheduled.
    """
    from sqla_scheduler.history import requeue as requeue_entry

    db_url, scheduler = _client_url(url, spec)
    with _database_errors(db_url):
        try:
            entry = requeue_entry(db_url, history_id, scheduler=scheduler)
        except LookupError as exc:
            _fail(str(exc.args[0]))
    click.echo(f"requeued {entry.task_name}/{entry.instance_id} (history entry {history_id})")


# --- results ----------------------------------------------------------------------------


@cli.command("result")
@click.argument("task_name", type=_TEXT, metavar="TASK")
@click.argument("instance_id", type=_TEXT, metavar="INSTANCE")
@_with_client_options
@click.option(
    "--wait",
    "wait",
    type=_Seconds(max=86400),
    metavar="SECONDS",
    help="Wait up to SECONDS (at most a day) for the result while the execution has not "
    "finished; exit 1 if there is none by then.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as a JSON object.")
@_read_url_option
def result(
    task_name: str,
    instance_id: str,
    url: str | None,
    spec: str | None,
    wait: float | None,
    as_json: bool,
    read_url: str | None,
) -> None:
    """Print the kept result of the execution TASK/INSTANCE: its outcome, when it finished,
    and the value its handler returned (as JSON) or its error.

    Tasks defined with keep_result=True, and the members of groups, keep results, for
    result_retention. Exits 1 when there is none: the execution has not finished (--wait
    waits for it), its task does not keep results, or the result was pruned.
    """
    from sqla_scheduler.results import read_result, wait_for_result

    name = _task_name(task_name)
    _instance_id(name, instance_id)
    db_url, scheduler = _client_url(url, spec, read_url)
    with _database_errors(db_url):
        if wait is None:
            found = read_result(db_url, name, instance_id, scheduler=scheduler)
        else:
            try:
                found = wait_for_result(
                    db_url, name, instance_id, scheduler=scheduler, timeout=wait
                )
            except TimeoutError:
                _fail(
                    f"no result of task {name!r}, instance {instance_id!r} after waiting "
                    f"{wait:g}s: it has not finished, its task does not keep results, or "
                    "it was pruned"
                )
    if found is None:
        _fail(
            f"no result of task {name!r}, instance {instance_id!r}: it has not finished, its "
            "task does not keep results, or it was pruned"
        )
    if as_json:
        click.echo(json.dumps(found.to_dict(), indent=2))
        return
    _print_result(found)


def _instance_id(task_name: str, instance_id: str) -> None:
    """Exit 2 unless ``instance_id`` is one ``schedule`` takes (not empty, not too long)."""
    from sqla_scheduler._checks import check_instance_id

    try:
        check_instance_id(task_name, instance_id)
    except ValueError as exc:
        _fail(str(exc), 2)


def _print_result(found: Result) -> None:
    """One field a line; the value (indented JSON) and the error (in full, with its
    traceback) continue on lines of their own, indented under it."""
    fields = [
        ("task", found.task_name),
        ("instance", found.instance_id),
        ("outcome", found.outcome),
        ("finished", _utc(found.finished_at)),
    ]
    if found.succeeded:
        fields.append(("value", json.dumps(found.value, indent=2, ensure_ascii=False)))
    if found.error is not None:
        fields.append(("error", found.error.rstrip("\n")))
    width = max(len(label) for label, _ in fields) + 2
    for label, text in fields:
        first, *rest = text.splitlines() or [""]
        click.echo(f"{label + ':':<{width}}{first}")
        for line in rest:
            click.echo(" " * width + line)


# --- control ----------------------------------------------------------------------------


def _on_client(url: str | None, spec: str | None, act: Callable[[Scheduler, Any], T]) -> T:
    """``act(client, connection)`` in one transaction on the database of --url/--app."""
    from sqla_scheduler.executions import connected

    db_url, scheduler = _client_url(url, spec)
    with _database_errors(db_url), connected(db_url, scheduler) as (client, conn):
        return act(client, conn)


def _task_name(task_name: str) -> str:
    from sqla_scheduler._checks import check_task_name

    try:
        check_task_name(task_name)
    except ValueError as exc:
        _fail(str(exc), 2)
    return task_name


@cli.command("pause")
@click.argument("task_name", type=_TEXT, metavar="TASK")
@_with_client_options
def pause(task_name: str, url: str | None, spec: str | None) -> None:
    """Pause TASK for every scheduler sharing the table, until `resume TASK`.

    No scheduler picks its executions meanwhile (those running finish); scheduling it
    still works. The pause is kept in the database: it outlives restarts.
    """
    name = _task_name(task_name)

    def act(client: Scheduler, conn: Any) -> tuple[bool, bool]:
        known = name in client.tasks or bool(client.executions(conn, task_name=name, limit=1))
        return client.pause(conn, name), known

    paused, known = _on_client(url, spec, act)
    if paused:
        click.echo(f"paused {name}")
    else:
        click.echo(f"{name} was paused already")
    if not known:  # a typo pauses nothing the user meant: say so, on stderr
        click.echo(
            f"sqla-scheduler: warning: no execution of {name} exists and no scheduler here "
            "registers it (--app names one); is the name right? It stays paused until "
            f"`sqla-scheduler resume {name}`",
            err=True,
        )


@cli.command("resume")
@click.argument("task_name", type=_TEXT, metavar="TASK")
@_with_client_options
def resume(task_name: str, url: str | None, spec: str | None) -> None:
    """Let the schedulers pick TASK again; what came due meanwhile runs now (a recurring
    run missed while paused, once)."""
    name = _task_name(task_name)
    if _on_client(url, spec, lambda client, conn: client.resume(conn, name)):
        click.echo(f"resumed {name}")
    else:
        click.echo(f"{name} was not paused")


@cli.command("run-now")
@click.argument("task_name", type=_TEXT, metavar="TASK")
@click.argument("instance_id", type=_TEXT, metavar="[INSTANCE]", default="recurring")
@_with_client_options
def run_now(task_name: str, instance_id: str, url: str | None, spec: str | None) -> None:
    """Make the execution TASK/INSTANCE due now, keeping its payload and schedule.

    INSTANCE defaults to `recurring`, a recurring task's one row. Exits 1 when there is no
    such execution or a scheduler is running it.
    """
    name = _task_name(task_name)
    if not _on_client(url, spec, lambda client, conn: client.run_now(conn, name, instance_id)):
        _fail(f"no execution {name}/{instance_id} that is not running: nothing was changed")
    click.echo(f"{name}/{instance_id} is due now")


# --- nodes ------------------------------------------------------------------------------


@cli.command("nodes")
@_url_option
@_interval_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list with every field.")
@_read_url_option
def nodes(url: str, interval: timedelta, as_json: bool, read_url: str | None) -> None:
    """List the schedulers recorded in the nodes table, alive or stale.

    Each running scheduler records itself every node_heartbeat_interval and removes its
    row when it stops cleanly; a row last written more than three intervals ago is stale
    (its process was killed, hangs, or cannot reach the database). Prints a table (name,
    state, host, pid, started and last seen in UTC, last seen age, concurrency, running,
    version), or with --json every field of each node.
    """
    from sqla_scheduler.nodes import list_nodes

    url = read_url or url
    with _database_errors(url):
        found = list_nodes(url, node_heartbeat_interval=interval)
    if as_json:
        click.echo(json.dumps([node.to_json() for node in found], indent=2))
        return
    _print_nodes(found)


def _print_nodes(found: list[Node]) -> None:
    now = datetime.now(timezone.utc)
    _print_table(
        [
            ("name", "left"),
            ("state", "left"),
            ("host", "left"),
            ("pid", "right"),
            ("started (UTC)", "left"),
            ("last seen (UTC)", "left"),
            ("seen", "right"),
            ("concurrency", "right"),
            ("running", "right"),
            ("version", "left"),
        ],
        (
            [
                node.name,
                "alive" if node.alive else "stale",
                node.host,
                str(node.pid),
                _utc(node.started_at),
                _utc(node.last_seen),
                f"{_age(now - node.last_seen)} ago",
                str(node.concurrency),
                str(node.running),
                node.version,
            ]
            for node in found
        ),
        empty="no nodes",
    )


def _utc(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- worker -----------------------------------------------------------------------------

_LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


@cli.command("worker")
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
@click.option(
    "--backend",
    type=click.Choice(["asyncio", "trio"]),
    default="asyncio",
    show_default=True,
    envvar="SQLA_SCHEDULER_BACKEND",
    show_envvar=True,
    help="anyio backend; trio needs a sync Engine.",
)
@click.option(
    "--log-level",
    type=click.Choice(_LOG_LEVELS, case_sensitive=False),
    default="info",
    show_default=True,
    envvar="SQLA_SCHEDULER_LOG_LEVEL",
    show_envvar=True,
    help="Level of the log written to stderr.",
)
@click.option(
    "--health-port",
    type=_Whole(0, 65535),
    default=None,
    envvar="SQLA_SCHEDULER_HEALTH_PORT",
    show_envvar=True,
    help="Serve GET /livez, /readyz and /metrics on this port while the worker runs "
    "(for Kubernetes' httpGet probes; 0 takes a free port).",
)
@click.option(
    "--health-host",
    default="0.0.0.0",
    show_default=True,
    envvar="SQLA_SCHEDULER_HEALTH_HOST",
    show_envvar=True,
    help="The address --health-port listens on.",
)
@click.option(
    "--collect-metrics",
    "collect_every",
    type=_Interval(),
    default=None,
    envvar="SQLA_SCHEDULER_COLLECT_METRICS",
    show_envvar=True,
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


def _command_line_envvars() -> frozenset[str]:
    """The ``SQLA_SCHEDULER_`` variables the commands read for their own options (not
    config keys): a worker skips them rather than call them unknown."""
    from sqla_scheduler.config import SchedulerConfig
    from sqla_scheduler.worker import ENV_PREFIX

    keys = {ENV_PREFIX + field.upper() for field in SchedulerConfig.__dataclass_fields__}
    found: set[str] = set()
    commands: list[click.Command] = [cli]
    while commands:
        command = commands.pop()
        if isinstance(command, click.Group):
            commands.extend(command.commands.values())
        for param in command.params:
            names = [param.envvar] if isinstance(param.envvar, str) else param.envvar or []
            found.update(n for n in names if n.startswith(ENV_PREFIX) and n not in keys)
    return frozenset(found)


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


# --- admin ------------------------------------------------------------------------------

_ADMIN_PACKAGES = ("starlette", "uvicorn", "jinja2")


def _missing_admin_packages() -> list[str]:
    return [name for name in _ADMIN_PACKAGES if importlib.util.find_spec(name) is None]


@cli.command("admin")
@click.argument("spec", metavar="MODULE:ATTR", envvar=_APP_ENVVAR)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    envvar="SQLA_SCHEDULER_ADMIN_HOST",
    show_envvar=True,
    help="Interface to listen on.",
)
@click.option(
    "--port",
    type=_Whole(1, 65535),
    default=8080,
    show_default=True,
    envvar="SQLA_SCHEDULER_ADMIN_PORT",
    show_envvar=True,
    help="Port to listen on.",
)
@click.option(
    "--actions/--read-only",
    default=False,
    show_default=True,
    envvar="SQLA_SCHEDULER_ADMIN_ACTIONS",
    show_envvar=True,
    help="Offer run now, retry, delete, requeue, pause and resume buttons (off: the page "
    "only reads).",
)
@click.option(
    "--read-url",
    default=None,
    envvar="SQLA_SCHEDULER_READ_URL",
    show_envvar=True,
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


# --- demo -------------------------------------------------------------------------------


@cli.command("demo")
@click.option(
    "--database-url",
    metavar="URL",
    help="Where to run it, e.g. a scratch PostgreSQL or MariaDB database (default: a new "
    "SQLite file in a temporary directory). DATABASE_URL is not read.",
)
@click.option(
    "--duration",
    type=_Seconds(max=86400),
    metavar="SECONDS",
    help="Stop after SECONDS, more than 0 and at most a day (default: run until Ctrl-C).",
)
@click.option(
    "--admin-port",
    type=_Whole(0, 65535),
    metavar="PORT",
    help="Also serve the admin page, actions on, at http://127.0.0.1:PORT/ while it runs "
    "(0: any free port); it prints the address and the password (ADMIN_PASSWORD when set, "
    "else a random one; user ADMIN_USER, default admin). Needs the admin extra.",
)
def demo(database_url: str | None, duration: float | None, admin_port: int | None) -> None:
    """Run a small shop on the scheduler and watch its executions live.

    Orders are placed with a confirmation scheduled in the same transaction (some roll
    back, and their confirmation never runs), carts are swept by cron, shipments polled by
    a task that reschedules itself, and cards charged by a flaky task that retries with
    backoff and, once out of retries, lands in a dead-letter table. Ends with a summary,
    after --duration or on Ctrl-C, and the `history` command that lists the abandoned
    charges.

    So that all this fits in seconds, its scheduler is tuned far from the defaults
    (polling every 200ms, retries after 1s): the first line it prints lists each setting.
    """
    from sqla_scheduler import _demo

    if admin_port is not None:
        try:
            import sqla_scheduler.admin  # noqa: F401  # its message names the extra
        except ImportError as exc:
            _fail(str(exc), 2)
    try:
        with _database_errors(database_url):
            _demo.run(database_url, duration, admin_port=admin_port)
    except _demo.DemoError as exc:
        _fail(f"the demo saw a broken promise: {exc}")
    except _demo.AdminPortError as exc:
        _fail(f"--admin-port {admin_port}: {exc}")


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="sqla-scheduler")
