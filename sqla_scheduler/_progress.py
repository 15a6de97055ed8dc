"""Progress a running handler reports: the value ``Execution.progress`` reads, and the
checks ``ExecutionContext.report_progress`` makes of what it is given.

A report is a fraction from 0 to 1, a message, or both. The message is text a database
can store (no NUL character, no lone surrogate: refused) of at most
``MAX_PROGRESS_MESSAGE`` characters (a longer one is cut to that many).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from numbers import Real

from sqla_scheduler._limits import text_problem

__all__ = ["MAX_PROGRESS_MESSAGE", "Progress", "checked_report", "whole_percent"]

MAX_PROGRESS_MESSAGE = 1024
"""The most characters of a progress message the row keeps; a longer one is cut."""


@dataclass(frozen=True, slots=True)
class Progress:
    """The latest progress a running execution's handler reported
    (``ctx.report_progress``), as written to its row."""

    fraction: float | None
    """How far along it is, from 0 to 1; ``None`` when only a message was reported."""
    message: str | None
    """What it said it is doing; ``None`` when only a fraction was reported."""
    at: datetime
    """When the report was written to the row (at most a second after it was made)."""


def checked_report(
    label: str, fraction: object, message: object
) -> tuple[float | None, str | None]:
    """``fraction`` and ``message`` as the row keeps them, for the execution ``label``
    (``task/instance``) names; a ``ValueError`` or ``TypeError`` naming it and the value
    when either cannot be."""
    if fraction is not None:
        if isinstance(fraction, bool) or not isinstance(fraction, Real):
            raise TypeError(f"{label}: progress must be a number from 0 to 1, got {fraction!r}")
        number = float(fraction)
        if not (math.isfinite(number) and 0 <= number <= 1):
            raise ValueError(f"{label}: progress must be from 0 to 1, got {fraction!r}")
        fraction = number
    if message is not None:
        if not isinstance(message, str):
            raise TypeError(f"{label}: a progress message must be a str, got {message!r}")
        problem = text_problem(message)
        if problem is not None:
            raise ValueError(f"{label}: the progress message {message[:80]!r} {problem}")
        message = message[:MAX_PROGRESS_MESSAGE]
    return fraction, message


def whole_percent(fraction: float) -> int:
    """``fraction`` (from 0 to 1) in whole percent, rounded down, as the command line and
    the admin show it: 100 only for a report of 1, never for one just short of it.

    It is taken from the fraction's shortest decimal form, so that a fraction a person
    wrote (0.29, whose double is just below) is the percent they meant (29, not 28).
    """
    return math.floor(Decimal(repr(fraction)) * 100)
