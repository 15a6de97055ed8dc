"""Column types that behave the same on every supported database."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import JSON, DateTime
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

__all__ = ["JSONOrNull", "JSONPayload", "UTCDateTime"]

#: JSON on every database, ``jsonb`` on PostgreSQL.
JSONPayload: TypeEngine[Any] = JSON().with_variant(JSONB(), "postgresql")
#: The same, storing Python's ``None`` as SQL ``NULL`` (not JSON ``null``), for a column
#: that is absent more often than not.
JSONOrNull: TypeEngine[Any] = JSON(none_as_null=True).with_variant(
    JSONB(none_as_null=True), "postgresql"
)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp that is always timezone-aware UTC in Python.

    PostgreSQL stores ``timestamptz``. SQLite has no time zone support, so values are stored
    as naive UTC and given back their ``tzinfo`` on the way out. Naive datetimes are refused
    on the way in: guessing their zone is how scheduled work ends up an hour early.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()!r}: pass a timezone-aware value")
        utc = value.astimezone(timezone.utc)
        if dialect.name == "sqlite":
            return utc.replace(tzinfo=None)
        return utc

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)
