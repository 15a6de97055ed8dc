"""How each database declares the scheduler's columns and tables: the types that differ
by database, named for what they hold.

SQLAlchemy chooses among them by the dialect that compiles the DDL or binds the value
(``with_variant``, ``@compiles``), so the models and the migration steps name one type
each and nothing outside this package names a database.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Integer, Text
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.types import TypeEngine

from sqla_scheduler._dialects.backends import known_backend

__all__ = [
    "BIG_ID",
    "JSON_COLUMN",
    "JSON_OR_NULL",
    "PAYLOAD_COLUMN",
    "TABLE_OPTIONS",
    "TEXT",
    "TIMESTAMP",
    "JSONText",
    "json_binder",
    "json_type",
]

_MYSQL = ("mysql", "mariadb")  # SQLAlchemy's two names for the dialects that reach MariaDB

#: A timestamp column: with a time zone where the database has one; to the microsecond on
#: MariaDB, whose ``DATETIME`` keeps whole seconds unless told.
TIMESTAMP: TypeEngine[Any] = DateTime(timezone=True).with_variant(mysql.DATETIME(fsp=6), *_MYSQL)
#: A text column of any length: MariaDB's ``TEXT`` holds 64 KB, its ``LONGTEXT`` 4 GB.
TEXT: TypeEngine[Any] = Text().with_variant(mysql.LONGTEXT(), *_MYSQL)
#: A JSON column: ``jsonb`` on PostgreSQL, the dialect's JSON elsewhere.
JSON_COLUMN: TypeEngine[Any] = JSON().with_variant(postgresql.JSONB(), "postgresql")
#: The same, storing Python's ``None`` as SQL ``NULL`` (not JSON ``null``).
JSON_OR_NULL: TypeEngine[Any] = JSON(none_as_null=True).with_variant(
    postgresql.JSONB(none_as_null=True), "postgresql"
)
#: The payload column as the first migration step created it: ``JSON_COLUMN``, but text on
#: MariaDB (see ``JSONText``).
PAYLOAD_COLUMN: TypeEngine[Any] = JSON_COLUMN.with_variant(mysql.LONGTEXT(), *_MYSQL)
#: An autoincrementing key: a 64-bit one, but SQLite's rowid alias, ``INTEGER``.
BIG_ID: TypeEngine[Any] = BigInteger().with_variant(Integer(), "sqlite")
#: Options of each of the scheduler's tables: on MariaDB, text compared byte by byte in
#: full Unicode (a server's default collation may fold case, which would make ``a`` and
#: ``A`` one task instance, or lack characters a payload holds).
TABLE_OPTIONS: dict[str, Any] = {
    f"{name}_{option}": value
    for name in _MYSQL
    for option, value in (("charset", "utf8mb4"), ("collate", "utf8mb4_bin"))
}


class JSONText(sqlite.JSON):
    """JSON kept as text (``Backend.json_storage == "text"``), declared as text: SQLite's
    ``TEXT`` (a column declared ``JSON`` has numeric affinity, and SQLite would store a
    top-level number's text as an integer or a real), MariaDB's ``LONGTEXT`` (its ``JSON``
    checks each value with ``JSON_VALID``, which refuses JSON nested past 32 levels)."""


@compiles(JSONText, "sqlite")
def _declare_text(type_: JSONText, compiler: Any, **kw: Any) -> str:
    return "TEXT"


@compiles(JSONText, *_MYSQL)
def _declare_long_text(type_: JSONText, compiler: Any, **kw: Any) -> str:
    return "LONGTEXT"


def json_type(dialect: Dialect) -> TypeEngine[Any]:
    """The type a JSON value binds and loads as on ``dialect`` (``Backend.json_storage``):
    ``jsonb``, JSON kept as text (``JSONText``, as it is: the dialect would adapt it to its
    own JSON), or the dialect's JSON for a database the scheduler does not run on (a
    statement compiled for another dialect)."""
    backend = known_backend(dialect)
    storage = None if backend is None else backend.json_storage
    if storage == "jsonb":
        return dialect.type_descriptor(postgresql.JSONB())
    if storage == "text":
        return JSONText()
    return dialect.type_descriptor(JSON())


def json_binder(dialect: Dialect, dumps: Callable[[Any], str]) -> Callable[[Any], Any]:
    """What binds a value, written by ``dumps``, to a JSON parameter on ``dialect``: the
    text ``dumps`` writes, wrapped where the driver needs its own wrapper for ``jsonb``
    (psycopg's ``Jsonb``)."""
    backend = known_backend(dialect)
    if backend is None or backend.json_storage != "jsonb" or dialect.driver != "psycopg":
        return dumps
    from psycopg.types.json import Jsonb

    return lambda value: Jsonb(value, dumps=dumps)
