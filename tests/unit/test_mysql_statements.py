"""MySQL 8 is not in the tests (it cannot be installed here), but SQLAlchemy writes some SQL
differently for it than for MariaDB: every statement the scheduler builds for the MySQL
dialect must compile for a MySQL 8 server as SQLAlchemy sees one once connected, with no
RETURNING anywhere (MySQL has none)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from typing import Any

import pytest
from sqlalchemy.dialects import mysql
from sqlalchemy.sql.expression import ClauseElement

from sqla_scheduler._dialects import Marking, backend_for
from sqla_scheduler._statements import statements_for
from sqla_scheduler.models import table_for


def _mysql_8(version: tuple[int, int, int]) -> Any:
    """The MySQL dialect as its ``initialize`` leaves it on a MySQL server of ``version``
    (what matters to compiling: the server's kind and version, and the upsert's form)."""
    dialect: Any = mysql.dialect()  # type: ignore[no-untyped-call]
    dialect.server_version_info, dialect.is_mariadb = version, False
    dialect._requires_alias_for_on_duplicate_key = version >= (8, 0, 20)
    return dialect


def _statements_in(value: Any, path: str) -> Iterator[tuple[str, ClauseElement]]:
    if isinstance(value, ClauseElement):
        yield path, value
    elif isinstance(value, Marking):
        for field in fields(value):
            yield from _statements_in(getattr(value, field.name), f"{path}.{field.name}")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _statements_in(item, f"{path}[{key!r}]")
    elif is_dataclass(value) and not isinstance(value, type):
        for field in fields(value):
            yield from _statements_in(getattr(value, field.name), f"{path}.{field.name}")
    elif hasattr(value, "__dict__") and type(value).__module__.startswith("sqla_scheduler."):
        for name, item in vars(value).items():
            yield from _statements_in(item, f"{path}.{name}")


@pytest.mark.parametrize("version", [(8, 0, 11), (8, 0, 36), (8, 4, 3)])
def test_every_statement_compiles_for_mysql_8_without_returning(
    version: tuple[int, int, int],
) -> None:
    dialect = _mysql_8(version)
    statements = statements_for(table_for(), backend_for(dialect))
    found = list(_statements_in(statements, "statements"))
    assert len(found) > 40  # the walk reaches them: parts, Markings and dicts of them
    for path, statement in found:
        sql = str(statement.compile(dialect=dialect))
        assert "RETURNING" not in sql.upper(), path
    upsert = str(statements.scheduling.upsert_recurring.compile(dialect=dialect))
    if version >= (8, 0, 20):  # MySQL's own form; MariaDB's VALUES() is deprecated there
        assert " AS new ON DUPLICATE KEY UPDATE" in upsert
        assert "VALUES(" not in upsert.partition("UPDATE")[2].replace(" ", "")
