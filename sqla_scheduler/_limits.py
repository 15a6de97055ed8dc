"""The bounds every number is held to and the text no name may hold, without imports: the
light modules (``config``, the command line) share them with ``_checks``."""

from __future__ import annotations

import re

__all__ = [
    "BIGINT_MAX",
    "DEFAULT_MAX_RESULT_SIZE",
    "MAX_CONCURRENCY",
    "MAX_RESULT_SIZE",
    "MAX_RETRIES",
    "MAX_SCHEMA_NAME_LENGTH",
    "MAX_TABLE_NAME_LENGTH",
    "MAX_TASK_CONCURRENCY",
    "control_problem",
    "identifier_problem",
    "text_problem",
]

#: The largest id, count, limit or offset a statement takes: a bigint's (PostgreSQL's and
#: SQLite's integers are 64 bits; a larger one is a driver error that aborts the caller's
#: transaction).
BIGINT_MAX = 2**63 - 1

#: The most executions one process runs at once. Its workers start and stop in about 0.1 s
#: (10 000 take about 1 s, 100 000 about 10 s, during which a stop request waits).
MAX_CONCURRENCY = 1000

#: The most retries a task or a config may allow: far more than any backoff needs.
MAX_RETRIES = 1_000_000
#: The default ``max_result_size``: 64 KB of JSON text.
DEFAULT_MAX_RESULT_SIZE = 64 * 1024
#: The largest ``max_result_size``.
MAX_RESULT_SIZE = 16 * 1024 * 1024

#: The largest ``max_concurrency`` of a task: a thousand processes at the largest
#: ``concurrency`` each.
MAX_TASK_CONCURRENCY = 1_000_000

#: The longest name of the scheduler's table: its ``_history`` table's name fits
#: PostgreSQL's 63 characters.
MAX_TABLE_NAME_LENGTH = 63 - len("_history")

#: The longest schema name: PostgreSQL's 63 characters.
MAX_SCHEMA_NAME_LENGTH = 63

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: Control characters (C0, DEL and C1): refused in names, which logs and pages print.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def text_problem(value: str) -> str | None:
    """What in ``value`` a database cannot store as text (PostgreSQL refuses a NUL and a
    lone surrogate), or ``None``."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains a lone surrogate (not valid Unicode)"
    return None


def control_problem(value: str) -> str | None:
    """``contains a control character`` when ``value`` has one, else ``None``."""
    return "contains a control character" if _CONTROL.search(value) else None


def identifier_problem(value: object, max_length: int) -> str | None:
    """What keeps ``value`` from being a table or schema name of at most ``max_length``
    characters (letters, digits and underscores, not starting with a digit), or ``None``."""
    if not isinstance(value, str):
        return f"is not a str but {type(value).__name__}"
    if len(value) > max_length:
        return f"is longer than {max_length} characters"
    if not _IDENTIFIER.fullmatch(value):
        return (
            "is not an identifier (use letters, digits and underscores, not starting with a digit)"
        )
    return None
