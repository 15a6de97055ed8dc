"""``sqla-scheduler alembic revision``: the scheduler's steps written as a revision of the
application's own Alembic history."""

from __future__ import annotations

import os

import click

from sqla_scheduler._limits import BIGINT_MAX, MAX_SCHEMA_NAME_LENGTH, MAX_TABLE_NAME_LENGTH
from sqla_scheduler.cli._errors import _fail
from sqla_scheduler.cli._params import _Identifier, _Whole
from sqla_scheduler.cli._root import _Group


@click.group("alembic", cls=_Group)
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
