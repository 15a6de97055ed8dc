"""Column types that behave the same on every supported database."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from sqla_scheduler._dialects import known_backend
from sqla_scheduler._dialects.columns import (
    JSON_OR_NULL,
    TABLE_OPTIONS,
    TEXT,
    TIMESTAMP,
    json_binder,
    json_type,
)

__all__ = [
    "TABLE_OPTIONS",
    "TEXT",
    "TIMESTAMP",
    "JSONOrNull",
    "JSONPayload",
    "PayloadJSON",
    "UTCDateTime",
    "UnreadableJSON",
    "dumps_payload",
    "load_json",
]

_WHOLE = re.compile(r'"\\u0000(\d+)"')


def dumps_payload(value: Any) -> str:
    """The JSON text of a payload, each number written so that both databases give back
    the type it was.

    PostgreSQL's jsonb keeps a number as ``numeric`` and writes ``1e+20`` back as
    ``100000000000000000000``, an int to whoever reads it. A float with a positive
    exponent (every one of them a whole number) is written out in full with ``.0``.
    """
    if value is None:
        return "null"
    text = json.dumps(value)
    if "e+" not in text:  # the common case: nothing to rewrite, one pass
        return text
    wholes: list[str] = []

    def mark(item: Any) -> Any:
        # A NUL never occurs in a stored string (it is refused on the way in), so the
        # escaped NUL of a marker can only be one of ours.
        if isinstance(item, float) and "e+" in repr(item):
            wholes.append(f"{int(item)}.0")
            return f"\x00{len(wholes) - 1}"
        if isinstance(item, list):
            return [mark(x) for x in item]
        if isinstance(item, dict):
            return {key: mark(x) for key, x in item.items()}
        return item

    try:
        marked = json.dumps(mark(value))
    except RecursionError:  # deeper than the walk can go: as json writes it
        return text
    return _WHOLE.sub(lambda found: wholes[int(found.group(1))], marked)


class UnreadableJSON(str):
    """Stored JSON text that Python cannot load (nested past the recursion limit, an
    integer too long to parse): the raw text, standing for the value of its row alone.
    A codec refuses to decode it, so its execution is removed as undecodable."""

    __slots__ = ()


def load_json(raw: Any) -> Any:
    """A JSON column's value from its text (the scheduler reads JSON columns as text, see
    ``Shapes.loaded_columns``), or ``UnreadableJSON`` when Python cannot parse it.

    A value that is not text is given back as it is: ``None``, or a number SQLite had
    stored as a number before revision ``e5a0c4b8f1d2``.
    """
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return UnreadableJSON(raw)


class PayloadJSON(TypeDecorator[Any]):
    """A payload column: ``jsonb`` on PostgreSQL, JSON text in a ``TEXT`` column on SQLite
    (``LONGTEXT`` on MariaDB), written by ``dumps_payload`` whatever serializer the engine
    has, so that the payload comes back as it was given. Python's ``None`` is JSON
    ``null``."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        return json_type(dialect)

    def bind_processor(self, dialect: Dialect) -> Callable[[Any], Any] | None:
        return json_binder(dialect, dumps_payload)


#: The payload column's type (see ``PayloadJSON``).
JSONPayload: TypeEngine[Any] = PayloadJSON()
#: The same, storing Python's ``None`` as SQL ``NULL`` (not JSON ``null``), for a column
#: that is absent more often than not.
JSONOrNull: TypeEngine[Any] = JSON_OR_NULL


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python.

    PostgreSQL stores ``timestamptz``. SQLite has no time zone support, so values are stored
    as naive UTC and given back their ``tzinfo`` on the way out. Naive datetimes are refused
    on the way in: guessing their zone is how scheduled work ends up an hour early.
    """

    impl = TIMESTAMP
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()!r}: pass a timezone-aware value")
        utc = value.astimezone(timezone.utc)
        backend = known_backend(dialect)
        if backend is not None and backend.naive_timestamps:
            return utc.replace(tzinfo=None)
        return utc

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)
