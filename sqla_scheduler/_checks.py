"""The checks every value passes on its way into the table, each naming what it checks.

A value a supported database cannot store exactly is refused here, before any statement
runs, so that the library never aborts the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

from sqla_scheduler._limits import (
    BIGINT_MAX,
    MAX_RETRIES,
    MAX_TASK_CONCURRENCY,
    control_problem,
    text_problem,
)
from sqla_scheduler.exceptions import TaskDefinitionError
from sqla_scheduler.models import MAX_INSTANCE_ID_LENGTH, MAX_TASK_NAME_LENGTH

__all__ = [
    "BIGINT_MAX",
    "EARLIEST",
    "LATEST",
    "MAX_RETRIES",
    "MAX_TASK_CONCURRENCY",
    "SMALLINT_MAX",
    "SMALLINT_MIN",
    "check_aware",
    "check_filters",
    "check_instance_id",
    "check_key",
    "check_number",
    "check_payload_version",
    "check_priority",
    "check_task_name",
    "control_problem",
    "is_int",
    "text_problem",
]

SMALLINT_MIN, SMALLINT_MAX = -32768, 32767


#: The earliest and latest times the scheduler stores: Python's years 1-9999 less a day
#: at each end, so that PostgreSQL can hand any of them back in any session time zone.
EARLIEST = datetime(1, 1, 2, tzinfo=timezone.utc)
LATEST = datetime(9999, 12, 31, tzinfo=timezone.utc) - timedelta(microseconds=1)
_RANGE = f"{EARLIEST.date().isoformat()} to {LATEST.date().isoformat()} UTC"


def is_int(value: object) -> bool:
    """An ``int`` that is not a ``bool``."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_aware(value: object, what: str) -> None:
    """Fail unless ``value`` is a timezone-aware datetime from ``EARLIEST`` to ``LATEST``."""
    if not isinstance(value, datetime):
        raise TaskDefinitionError(f"{what} must be a datetime, got {value!r}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise TaskDefinitionError(
            f"{what} must be timezone-aware, got naive {value.isoformat()!r} "
            "(use datetime.now(timezone.utc) or attach a tzinfo)"
        )
    try:
        within = EARLIEST <= value.astimezone(timezone.utc) <= LATEST
    except OverflowError:
        within = False
    if not within:
        raise TaskDefinitionError(
            f"{what} {value.isoformat()!r} is outside {_RANGE}, the times every database "
            "reads back in any time zone"
        )


def check_text_key(value: object, what: str | Callable[[], str], limit: int) -> None:
    """Fail unless ``value`` is a usable key; ``what`` names it (built only on failure)."""
    if (
        isinstance(value, str)
        and 0 < len(value) <= limit
        and value.isascii()
        and value == value.strip()
        and "\x00" not in value
    ):
        return  # the common case, with nothing to encode or name
    name = what if isinstance(what, str) else what()
    if not isinstance(value, str):
        raise TaskDefinitionError(f"{name} must be a str, got {value!r}")
    if not value:
        raise TaskDefinitionError(f"{name} must not be empty")
    if value != value.strip():
        raise TaskDefinitionError(f"{name} {value!r} has leading or trailing white space")
    problem = text_problem(value)
    if problem is not None:
        raise TaskDefinitionError(f"{name} {value!r} {problem}")
    if len(value) > limit:
        raise TaskDefinitionError(
            f"{name} {value[:40]!r}... is {len(value)} characters long; the limit is {limit}"
        )


def check_task_name(name: object) -> None:
    """Fail unless ``name`` is a usable task name: a key without control characters."""
    check_text_key(name, "task name", MAX_TASK_NAME_LENGTH)
    if isinstance(name, str) and control_problem(name) is not None:
        raise TaskDefinitionError(f"task name {name!r} contains a control character")


def check_key(task_name: object, instance_id: object = None) -> None:
    """Fail unless ``task_name`` (and ``instance_id``, unless ``None``) is text a database
    can be asked for: what a lookup, a move or a removal is given. Any other text is asked
    for and found or not (an empty key, or one written before today's rules, such as a name
    with a control character, is answered as it always was)."""
    _check_stored(task_name, "task name")
    if instance_id is not None:
        _check_stored(instance_id, lambda: f"task {task_name!r}: instance id")


def check_filters(task_name: object, instance_id: object = None) -> None:
    """Fail unless the ``task_name`` and ``instance_id`` filters of a listing, each unless
    ``None``, are text a database can be asked for."""
    if task_name is not None:
        _check_stored(task_name, "task_name")
    if instance_id is not None:
        _check_stored(instance_id, "instance_id")


def _check_stored(value: object, what: str | Callable[[], str]) -> None:
    """Fail unless ``value`` is a str that a database can compare (no NUL, no lone
    surrogate: a driver error that aborts the caller's transaction on PostgreSQL)."""
    if isinstance(value, str) and value.isascii() and "\x00" not in value:
        return  # the common case, with nothing to encode or name
    name = what if isinstance(what, str) else what()
    if not isinstance(value, str):
        raise TaskDefinitionError(f"{name} must be a str, got {value!r}")
    problem = text_problem(value)
    if problem is not None:
        raise TaskDefinitionError(f"{name} {value[:80]!r} {problem}")


def check_number(what: str, value: object, low: int, high: int = BIGINT_MAX) -> None:
    """Fail with a ``ValueError`` naming ``what`` unless ``value`` is an int from ``low``
    to ``high``: an id, count, limit or offset, checked before any statement runs."""
    if not is_int(value) or not low <= value <= high:  # type: ignore[operator]
        raise ValueError(f"{what} must be an int from {low} to {high}, got {value!r}")


def check_instance_id(task_name: str, instance_id: object) -> None:
    """Fail unless ``instance_id`` is a usable instance id of ``task_name``."""
    check_text_key(instance_id, lambda: f"task {task_name!r}: instance id", MAX_INSTANCE_ID_LENGTH)


def check_priority(task_name: str, field_name: str, value: object) -> None:
    """Fail unless ``value`` is a priority the column holds (a smallint)."""
    if not is_int(value) or not SMALLINT_MIN <= value <= SMALLINT_MAX:  # type: ignore[operator]
        raise TaskDefinitionError(
            f"task {task_name!r}: {field_name} must be an int from {SMALLINT_MIN} to "
            f"{SMALLINT_MAX}, got {value!r}"
        )


def check_payload_version(task_name: str, field_name: str, value: object) -> None:
    """Fail unless ``value`` is a payload version the column holds: 1 to the smallint's
    largest value."""
    if not is_int(value) or not 1 <= value <= SMALLINT_MAX:  # type: ignore[operator]
        raise TaskDefinitionError(
            f"task {task_name!r}: {field_name} must be an int from 1 to {SMALLINT_MAX}, "
            f"got {value!r}"
        )
