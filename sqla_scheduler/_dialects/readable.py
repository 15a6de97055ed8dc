"""Which rows the scheduler can read: one SQL condition per column that can hold a value
no scheduler could load, so that such a row is left out of picks, revivals and listings
instead of failing them.

The scheduler never writes such values; a person, an older version or a bug can. On
PostgreSQL only timestamps can be out of Python's range (``timestamptz`` reaches 4713 BC
and 294276 AD; psycopg reads years 1-9999, in the session's time zone); MariaDB's reach
years 1000-9999, checked all the same. On SQLite a column holds any value of any type, so
every column is checked for what the scheduler writes there.

A ``Backend`` names one of ``typed_zoned`` (PostgreSQL), ``typed_naive`` (MariaDB) and
``dynamic`` (SQLite) as its ``readable``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Integer,
    Table,
    Text,
    and_,
    case,
    func,
    literal_column,
    or_,
    type_coerce,
)

__all__ = ["dynamic", "typed_naive", "typed_zoned"]

_TIMESTAMPS = ("execution_time", "last_heartbeat", "last_success", "last_failure", "started_at")
_INTEGERS = ("consecutive_failures", "version", "priority", "payload_version")
_TEXTS = ("task_name", "task_instance", "picked_by", "schedule", "last_error")
_JSON = ("task_data", "trace_context")
#: The fraction of a second SQLAlchemy writes after a SQLite timestamp's seconds.
_FRACTION = "." + "[0-9]" * 6


def typed_zoned(
    table: Table, earliest: datetime, latest: datetime
) -> dict[str, ColumnElement[bool]]:
    """PostgreSQL: timestamps with a zone between ``earliest`` and ``latest``, and a
    trace context a ``jsonb`` object."""
    is_object = func.jsonb_typeof(table.c.trace_context) == _const("object")
    return _typed(table, earliest, latest, "+00", is_object)


def typed_naive(
    table: Table, earliest: datetime, latest: datetime
) -> dict[str, ColumnElement[bool]]:
    """MariaDB: naive UTC timestamps between ``earliest`` and ``latest``, and a trace
    context whose JSON text (checked valid on the way in) is an object."""
    is_object = func.json_type(type_coerce(table.c.trace_context, Text)) == _const("OBJECT")
    return _typed(table, earliest, latest, "", is_object)


def _typed(
    table: Table, earliest: datetime, latest: datetime, zone: str, is_object: ColumnElement[bool]
) -> dict[str, ColumnElement[bool]]:
    """Timestamps in range (compared with text the server reads as a timestamp, with the
    ``zone`` where it has one), and a trace context an object (``is_object``)."""
    c = table.c
    checks: dict[str, ColumnElement[bool]] = {}
    for name in _TIMESTAMPS:
        column = c[name]
        within = and_(
            type_coerce(column, Text) >= _const(f"{_text(earliest)}{zone}"),
            type_coerce(column, Text) <= _const(f"{_text(latest)}{zone}"),
        )
        checks[name] = within if not column.nullable else or_(column.is_(None), within)
    context = type_coerce(c.trace_context, Text)
    checks["trace_context"] = or_(context.is_(None), is_object)
    return checks


def dynamic(table: Table, earliest: datetime, latest: datetime) -> dict[str, ColumnElement[bool]]:
    """SQLite: it stores what it is given; each column is checked for its own kind of value.

    Timestamps are text as SQLAlchemy writes them (``YYYY-MM-DD HH:MM:SS.ffffff``), in
    range, and a real date: normalizing its first 19 characters (the ``+0 days``
    modifier) leaves them unchanged, and what follows is six digits of a fraction. Not
    the whole text: SQLite rounds a time to the millisecond, so ``...:59.9996`` would
    normalize to the next second.
    """
    c = table.c
    checks: dict[str, ColumnElement[bool]] = {}

    def typed(name: str, kinds: tuple[str, ...], also: ColumnElement[bool] | None = None) -> None:
        raw = type_coerce(c[name], Text)
        kind = func.typeof(raw).in_([_const(k) for k in kinds])
        check = kind if also is None else and_(kind, also)
        checks[name] = check if not c[name].nullable else or_(raw.is_(None), check)

    for name in _TIMESTAMPS:
        raw = type_coerce(c[name], Text)
        typed(
            name,
            ("text",),
            and_(
                func.substr(raw, _const(1), _const(19))
                == func.datetime(func.substr(raw, _const(1), _const(19)), _const("+0 days")),
                or_(
                    func.length(raw) == _const(19),
                    func.substr(raw, _const(20)).op("GLOB")(_const(_FRACTION)),
                ),
                raw >= _const(_text(earliest)),
                raw <= _const(_text(latest)),
            ),
        )
    for name in _INTEGERS:
        typed(name, ("integer",))
    for name in _TEXTS:
        typed(name, ("text",))
    typed("picked", ("integer",), type_coerce(c.picked, Integer).in_([_const(0), _const(1)]))
    json_kinds = ("text", "integer", "real")  # SQLite gives a top-level number its own type
    data = type_coerce(c.task_data, Text)
    typed("task_data", json_kinds, func.json_valid(data) == _const(1))
    # json_type() fails on malformed JSON, and SQLite may evaluate an AND in any order
    context = type_coerce(c.trace_context, Text)
    kind = case((func.json_valid(context) == _const(1), func.json_type(context)))
    typed("trace_context", ("text",), kind == _const("object"))
    return checks


def _const(value: str | int) -> ColumnElement[Any]:
    """A constant of ours written into the statement, not bound: the checks run on every
    row a pick considers, and binding fifty constants per statement costs time."""
    return literal_column(str(value) if isinstance(value, int) else f"'{value}'")


def _text(value: datetime) -> str:
    """``value`` as SQLAlchemy writes a UTC timestamp on SQLite."""
    return value.replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")
