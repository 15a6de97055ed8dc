"""What a service logs when its unit of work fails again and again (a database outage).

A service retries a failed unit every second or so; a traceback with the whole statement
each time made an outage of one minute thousands of lines. ``Failures`` logs the first
failure of a run of them in one line (the database's error in its first line; the
traceback only for an error that is not the database's, a bug to report), then a line a
minute with how many failed since, and one line when the unit works again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from sqlalchemy.exc import DBAPIError

__all__ = ["REPEAT_EVERY", "Failures", "first_line"]

log = logging.getLogger("sqla_scheduler")

#: How often a run of failures is summed up in the log while it lasts (seconds).
REPEAT_EVERY = 60.0


class Failures:
    """The failures of one service's unit of work (``what``: "picking due executions")."""

    def __init__(
        self,
        what: str,
        clock: Callable[[], float] = time.monotonic,
        expected: tuple[type[BaseException], ...] = (DBAPIError,),
        quiet: Callable[[BaseException], bool] = lambda error: False,
    ) -> None:
        self.what = what
        self._clock = clock
        #: The errors of the database itself (logged in a line, without a traceback).
        self._expected = expected
        #: The errors not worth a word until they have lasted ``REPEAT_EVERY`` (a busy
        #: database, for work that can wait).
        self._quiet = quiet
        #: Failures since the unit last worked.
        self.count = 0
        #: Whether the log has heard of them.
        self._said = False
        self._since = 0.0
        self._told = 0.0
        self._told_count = 0

    def failed(self, error: BaseException) -> None:
        """The unit failed with ``error``; it will be retried."""
        now = self._clock()
        self.count += 1
        if self.count == 1:
            self._since = now
        if not self._said:
            if self._quiet(error) and now - self._since < REPEAT_EVERY:
                log.debug("%s failed: %s; retrying", self.what, first_line(error))
                return
            self._said = True
            self._told, self._told_count = now, self.count
            if isinstance(error, self._expected):  # the database's own error: its first line
                log.warning("%s failed: %s; retrying", self.what, first_line(error))
            else:
                log.warning("%s failed; retrying", self.what, exc_info=error)
            return
        if now - self._told >= REPEAT_EVERY:
            log.warning(
                "%s still fails: %d failure(s) in the last %.0fs, the latest: %s",
                self.what,
                self.count - self._told_count,
                now - self._told,
                first_line(error),
            )
            self._told, self._told_count = now, self.count

    async def attempt(self, unit: Callable[[], Awaitable[object]]) -> None:
        """Run ``unit`` once: a failure is counted (``failed``), a success noted
        (``worked``); neither is raised."""
        try:
            await unit()
        except Exception as exc:
            self.failed(exc)
        else:
            self.worked()

    def worked(self) -> None:
        """The unit worked: say so once after failures the log heard of."""
        if self._said:
            log.warning(
                "%s works again, after %d failure(s) over %.0fs",
                self.what,
                self.count,
                self._clock() - self._since,
            )
        self.count = 0
        self._said = False


def first_line(error: BaseException) -> str:
    """``error`` in one line: a database error's own first line, without the statement."""
    cause = error.orig if isinstance(error, DBAPIError) and error.orig is not None else error
    text = str(cause).strip()
    return f"{type(cause).__name__}: {text.splitlines()[0] if text else ''}".rstrip(": ")
