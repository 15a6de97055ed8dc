"""Duration strings such as ``250ms``, ``10s``, ``5m``, ``1h`` and ``14d``.

Parsing is delegated to pytimeparse2; formatting writes the shortest text that parses back
to the same ``timedelta``.
"""

from __future__ import annotations

from datetime import timedelta

import pytimeparse2

_UNITS: tuple[tuple[str, timedelta], ...] = (
    ("d", timedelta(days=1)),
    ("h", timedelta(hours=1)),
    ("m", timedelta(minutes=1)),
    ("s", timedelta(seconds=1)),
)


def parse_duration(text: str) -> timedelta:
    """Parse a non-negative duration such as ``"250ms"`` or ``"1h30m"``.

    Raises ``ValueError`` with the text in the message when it is not a duration or
    is negative.
    """
    cleaned = text.strip()
    # pytimeparse2 reads any Unicode digit (a full-width 5); a duration is written in ASCII.
    seconds = pytimeparse2.parse(cleaned) if cleaned and cleaned.isascii() else None
    if seconds is None:
        raise ValueError(f"{text!r} is not a duration (try '250ms', '10s', '5m', '1h' or '14d')")
    value = timedelta(seconds=seconds)
    if value < timedelta(0):
        raise ValueError(f"{text!r} is negative; a duration must be zero or more")
    return value


def format_duration(value: timedelta) -> str:
    """Write ``value`` in the compact form ``parse_duration`` reads, e.g. ``"1h30m"``."""
    if value < timedelta(0):
        raise ValueError(f"cannot format a negative duration: {value!r}")
    if value == timedelta(0):
        return "0s"
    parts: list[str] = []
    rest = value
    for suffix, unit in _UNITS:
        count, rest = divmod(rest, unit)
        if count:
            parts.append(f"{count}{suffix}")
    micros = rest.microseconds
    if micros % 1000 == 0:
        if micros:
            parts.append(f"{micros // 1000}ms")
    else:
        # pytimeparse2 has no microsecond unit, so the fraction goes on the seconds.
        seconds = int(parts.pop()[:-1]) if parts and parts[-1].endswith("s") else 0
        parts.append(f"{seconds}.{micros:06d}".rstrip("0") + "s")
    return "".join(parts)
