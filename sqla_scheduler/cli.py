"""The ``sqla-scheduler`` command: a thin layer over public functions."""

from __future__ import annotations

import sys
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


def _fail(message: str) -> None:
    click.echo(f"sqla-scheduler: {message}", err=True)
    sys.exit(1)


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


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="sqla-scheduler")
