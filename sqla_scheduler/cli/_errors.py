"""Failing as every command fails: one line on stderr, ``sqla-scheduler: <what went
wrong>``, and exit status 1 (the work failed) or 2 (bad usage); the usual database errors
turned into such a line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import click
from sqlalchemy import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError

from sqla_scheduler.exceptions import MissingTableError, UnknownStepError


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
