"""The text of a failed attempt's error, as the row keeps it in ``last_error``.

The first line is the exception as Python ends a traceback with it (its type, qualified by
its module unless built in, and message); the traceback follows as Python prints it, its
final exception line not repeated. At most ``MAX_ERROR_TEXT`` characters are kept:

- the type and message, at most ``MAX_SUMMARY`` characters of them;
- of a longer traceback, its start (how the handler was entered and the first chained
  causes) and its last lines (where the final exception was raised), which take three
  quarters of the room left; a line ``[... N characters cut ...]`` stands for the middle.

Cuts fall between lines where a line ends near enough. Characters a text column cannot
hold (NUL on PostgreSQL, lone surrogates in any UTF-8 column) are written as their
backslash escapes (``\\x00``, ``\\udcff``), so that no message can fail the write of a
batch of outcomes.
"""

from __future__ import annotations

import traceback

__all__ = ["MAX_ERROR_TEXT", "MAX_SUMMARY", "error_text"]

MAX_ERROR_TEXT = 4096
"""The most characters of error text a row keeps."""
MAX_SUMMARY = 1024
"""The most characters of that text the exception's type and message take."""

_TAIL_SHARE = 0.75


def error_text(error: BaseException) -> str:
    """``error`` as ``last_error`` keeps it: type and message, then the traceback, cut to
    ``MAX_ERROR_TEXT`` characters (see the module's docstring)."""
    try:
        formatted = traceback.TracebackException.from_exception(error)
        only = list(formatted.format_exception_only())
        lines = list(formatted.format())
    except Exception:  # a broken exception (its __str__ is caught by traceback itself)
        only, lines = [f"{type(error).__qualname__}: <the error could not be formatted>"], []
    if only and lines[-len(only) :] == only:
        lines = lines[: -len(only)]
    summary = _cut_end(_storable("".join(only).rstrip("\n")), MAX_SUMMARY)
    trace = _storable("".join(lines).rstrip("\n"))
    if not trace:
        return summary
    return f"{summary}\n{_cut_middle(trace, MAX_ERROR_TEXT - len(summary) - 1)}"


def _storable(text: str) -> str:
    """``text`` with NUL and lone surrogates written as their backslash escapes."""
    escaped = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return escaped.replace("\x00", "\\x00")


def _marker(cut: int) -> str:
    return f"[... {cut} characters cut ...]"


def _cut_end(text: str, room: int) -> str:
    """``text``, or as much of its start as fits in ``room`` with the marker after it."""
    if len(text) <= room:
        return text
    keep = room - len(_marker(len(text))) - 1
    return f"{text[:keep]} {_marker(len(text) - keep)}"


def _cut_middle(text: str, room: int) -> str:
    """``text``, or its start and its end around the marker, in ``room`` characters."""
    if len(text) <= room:
        return text
    space = room - len(_marker(len(text))) - 2  # the marker and the line breaks around it
    if space <= 0:
        return _cut_end(text, room)
    tail_room = int(space * _TAIL_SHARE)
    head = text[: space - tail_room]
    tail = text[len(text) - tail_room :]
    # end the head and start the tail at a line break, if one is in the second half
    if (end := head.rfind("\n")) >= len(head) // 2:
        head = head[:end]
    if 0 <= (start := tail.find("\n")) <= len(tail) // 2:
        tail = tail[start + 1 :]
    return f"{head}\n{_marker(len(text) - len(head) - len(tail))}\n{tail}"
