"""Database URLs: a database the scheduler does not run on is bad usage (exit 2) saying which
it does, before any driver is imported; a Heroku-style ``postgres://`` gets the URL meant;
``postgresql://`` without a driver uses the one the package installs.

Every command that takes a URL reads it through the same check, run in this process.
"""

from __future__ import annotations

import pytest

from sqla_scheduler._dialects import sync_url
from tests.support.cli import invoke, one_error_line

#: Every command that reads --url (or --database-url), with its other arguments.
URL_COMMANDS = [
    ("db", "upgrade"),
    ("db", "downgrade", "base"),
    ("db", "current"),
    ("health",),
    ("executions",),
    ("history",),
    ("requeue", "1"),
    ("pause", "t"),
    ("resume", "t"),
    ("run-now", "t"),
    ("nodes",),
]


def with_url(command: tuple[str, ...], url: str) -> tuple[str, ...]:
    option = "--database-url" if command == ("demo",) else "--url"
    return (*command, option, url)


@pytest.mark.parametrize(
    "url",
    [
        "oracle://app@localhost/shop",
        "mssql+pyodbc://app@localhost/shop",
    ],
)
def test_an_unsupported_database_is_bad_usage_naming_the_supported_ones(url: str) -> None:
    """Exit 2, not a driver's import error (exit 1): none of these drivers is installed."""
    for command in [*URL_COMMANDS, ("demo",)]:
        result = invoke(*with_url(command, url))
        line = one_error_line(result.stderr)
        assert result.returncode == 2, (command, result.stderr)
        assert f"bad database URL {url}" in line, line
        assert "supports PostgreSQL, SQLite, MariaDB and MySQL" in line, line
        assert "driver" not in line, line


def test_a_postgres_url_names_the_url_meant_with_its_password_hidden() -> None:
    for command in [*URL_COMMANDS, ("demo",)]:
        result = invoke(*with_url(command, "postgres://app:s3cret@db.example/shop"))
        line = one_error_line(result.stderr)
        assert result.returncode == 2, (command, result.stderr)
        assert "did you mean postgresql+psycopg://app:***@db.example/shop?" in line, line
        assert "s3cret" not in line, line
    result = invoke("db", "current", "--url", "postgres+asyncpg://app@db.example/shop")
    assert "did you mean postgresql+asyncpg://app@db.example/shop?" in result.stderr


def test_a_postgresql_url_without_a_driver_uses_psycopg(pg_url: str) -> None:
    """SQLAlchemy 2.0 would pick psycopg2 for ``postgresql://``, which is not installed."""
    assert sync_url("postgresql://app@db.example/shop").drivername == "postgresql+psycopg"
    bare = pg_url.replace("postgresql+psycopg://", "postgresql://")
    result = invoke("db", "current", "--url", bare)
    assert result.returncode == 0, result.stderr
