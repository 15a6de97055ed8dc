"""Which databases the scheduler runs on, checked on a URL before any driver is imported."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import URL, Engine, create_engine, make_url
from sqlalchemy.exc import ArgumentError

__all__ = [
    "SUPPORTED",
    "UnsupportedDatabaseError",
    "check_url",
    "sync_url",
    "tool_engine",
    "unsupported",
]

_ASYNC_TO_SYNC = {
    "aiosqlite": "pysqlite",
    "asyncpg": "psycopg",
    "psycopg_async": "psycopg",
    "asyncmy": "pymysql",
    "aiomysql": "pymysql",
}

#: The databases the scheduler runs on, by SQLAlchemy's backend name, with an example URL
#: of each: the one list a URL or an engine is checked against.
SUPPORTED = {
    "postgresql": ("PostgreSQL", "postgresql+psycopg://user@host/db"),
    "sqlite": ("SQLite", "sqlite:///app.db"),
    "mariadb": ("MariaDB", "mariadb+pymysql://user@host/db"),
    "mysql": ("MySQL", "mysql+pymysql://user@host/db"),
}
#: The driver a URL without one gets: the one the package depends on (SQLAlchemy 2.0's
#: default for ``postgresql://`` is psycopg2, which it does not install).
_DEFAULT_DRIVER = {"postgresql": "psycopg", "mysql": "pymysql", "mariadb": "pymysql"}
#: Backend names SQLAlchemy does not know that mean a supported one (Heroku's and others'
#: ``postgres://``), with the name meant.
_MEANT = {"postgres": "postgresql", "postgis": "postgresql", "sqlite3": "sqlite"}


class UnsupportedDatabaseError(ArgumentError, NotImplementedError):
    """A URL names a database the scheduler does not run on: a bad URL to the command line
    (``ArgumentError``), and what an engine on that database raises (``NotImplementedError``)."""


def unsupported(name: str) -> str:
    names = list(dict.fromkeys(label for label, _ in SUPPORTED.values()))
    examples = ", ".join(
        dict.fromkeys(example for key, (_, example) in SUPPORTED.items() if key != "mysql")
    )
    return (
        f"sqla-scheduler supports {', '.join(names[:-1])} and {names[-1]}, not {name!r} "
        f"(URLs such as {examples})"
    )


def check_url(url: str | URL) -> URL:
    """``url`` parsed and checked before any driver is imported: a database the scheduler
    does not support raises [`UnsupportedDatabaseError`][] naming those it does, a misspelt one
    (``postgres://``) ``ArgumentError`` with the URL meant, and ``postgresql://`` without a
    driver gets the package's (psycopg).
    """
    parsed = make_url(url)
    backend, driver = parsed.get_backend_name(), parsed.drivername.partition("+")[2]
    if backend in _MEANT:
        meant = _MEANT[backend]
        fixed = parsed.set(drivername=f"{meant}+{driver or _DEFAULT_DRIVER.get(meant, '')}")
        shown = fixed.render_as_string(hide_password=True).replace("+:", ":")
        raise ArgumentError(
            f"SQLAlchemy calls {SUPPORTED[meant][0]} {meant!r}, not {backend!r}: "
            f"did you mean {shown}?"
        )
    if backend not in SUPPORTED:
        raise UnsupportedDatabaseError(unsupported(backend))
    if not driver and backend in _DEFAULT_DRIVER:
        parsed = parsed.set(drivername=f"{backend}+{_DEFAULT_DRIVER[backend]}")
    return parsed


def sync_url(url: str | URL) -> URL:
    """``url``, checked (``check_url``), with an async driver swapped for its sync
    counterpart (migrations and one-off reads are sync)."""
    parsed = check_url(url)
    driver = parsed.get_driver_name()
    if driver in _ASYNC_TO_SYNC:
        parsed = parsed.set(drivername=f"{parsed.get_backend_name()}+{_ASYNC_TO_SYNC[driver]}")
    return parsed


def tool_engine(url: str | URL, **options: Any) -> Engine:
    """A sync engine on ``url`` for the library's one-off work (migrations, health checks,
    listings: ``sqla-scheduler`` commands), which prepares no statement: through a pooler
    in transaction mode a prepared statement may be another client's by its next run, and
    none of this work runs a statement often enough to gain from preparing it. ``options``
    go to ``create_engine``."""
    parsed = sync_url(url)
    no_prepare = {"prepare_threshold": None} if parsed.get_driver_name() == "psycopg" else {}
    return create_engine(parsed, connect_args=no_prepare, **options)


@contextmanager
def borrowed_engine(bind: str | URL | Engine) -> Iterator[Engine]:
    """``bind`` itself when it is an engine (the caller's: left open), else a
    ``tool_engine`` on it, disposed of when the block ends: the one way the library's
    one-off calls (listings, health, migrations) reach a database they are given by URL."""
    if isinstance(bind, Engine):
        yield bind
        return
    engine = tool_engine(bind)
    try:
        yield engine
    finally:
        engine.dispose()
