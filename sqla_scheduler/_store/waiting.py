"""Waiting for a kept result: ``Scheduler.wait``.

A waiter reads the result, and until there is one waits for a sign that it may be there
now. On PostgreSQL the sign is the NOTIFY that the transaction recording a kept result
sends on the results' channel (``result_store.record``): a ``Bell`` hears it through the
process's notifier (one LISTEN connection for every waiter of the process), subscribed
from before the first read, so that no result is missed between a read and the next
wait. The NOTIFY carries the result itself unless it is too long for one; then the waiter
reads it. Elsewhere, or when the LISTEN cannot be made,
the waiter reads again after a pause that grows from ``FIRST_POLL`` to ``LAST_POLL``,
and it reads every ``LAST_POLL`` even while listening, should a NOTIFY not arrive (a
connection pooler in transaction mode does not carry LISTEN).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from datetime import timedelta
from typing import Any

from sqla_scheduler._dialects import ResultNotice, read_result_notice
from sqla_scheduler._notifier import Subscription, notifier_for
from sqla_scheduler._result import RESULT_OUTCOMES, Result, decode_result

__all__ = ["FIRST_POLL", "LAST_POLL", "Bell", "Waiting", "check_timeout"]

log = logging.getLogger("sqla_scheduler")

#: The first pause between two reads without a NOTIFY to wait for, in seconds.
FIRST_POLL = 0.01
#: The longest pause between two reads.
LAST_POLL = 1.0
#: How long a bell waits for its LISTEN to be in place before the first read.
LISTEN_READY = 2.0


def check_timeout(value: object) -> float:
    """``value`` (seconds or a ``timedelta``; ``None``: no limit) as seconds."""
    if value is None:
        return math.inf
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(f"timeout must be seconds, a timedelta or None, got {value!r}")
    if math.isnan(seconds) or seconds < 0:
        raise ValueError(f"timeout must be zero or more, got {value!r}")
    return seconds


class Waiting:
    """How long to pause after each read that found nothing, until ``timeout`` seconds
    have passed; then ``TimeoutError`` naming what was waited for."""

    def __init__(self, label: str, timeout: float, *, listening: bool) -> None:
        self.label = label
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self._poll = LAST_POLL if listening else FIRST_POLL

    def pause(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no result of {self.label} within {self.timeout:g}s")
        pause = min(left, self._poll)
        self._poll = min(self._poll * 2, LAST_POLL)
        return pause


class Bell:
    """Rings when the result of one execution is announced on ``channel``: a subscriber of
    the process's notifier (``_notifier``) for the database ``connect_args`` reach, so that
    every waiter of a process shares one LISTEN connection. ``listening`` says whether the
    LISTEN was in place. Use as a context manager: ``__enter__`` returns once the LISTEN
    is in place (or after ``LISTEN_READY``), ``__exit__`` leaves."""

    def __init__(
        self, connect_args: dict[str, Any], channel: str, task_name: str, instance_id: str
    ) -> None:
        self._connect_args = connect_args
        self._channel = channel
        self._expected = (task_name, instance_id)
        #: The result the NOTIFY carried, once the bell rang with one.
        self.result: Result | None = None
        self._rung = threading.Event()
        self._subscription: Subscription | None = None
        self.listening = False

    def __enter__(self) -> Bell:
        notifier = notifier_for(self._connect_args)
        self._subscription = notifier.subscribe(self._channel, self._heard, on_lost=self._lost)
        self.listening = self._subscription.ready.wait(LISTEN_READY)
        if not self.listening:
            log.debug("wait: LISTEN is not in place; reading the result by polling")
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._subscription is not None:
            self._subscription.close()

    def wait(self, seconds: float) -> Result | None:
        """Wait up to ``seconds`` for the bell (then it is reset): the result its NOTIFY
        carried, or ``None`` when the waiter must read (no NOTIFY came, or it carried only
        the key)."""
        rung = self._rung.wait(seconds)
        self._rung.clear()
        return self.result if rung else None

    def _heard(self, payload: str) -> None:
        notice = read_result_notice(payload)
        if notice is not None and notice[:2] == self._expected:
            self.result = _carried(notice)
            self._rung.set()

    def _lost(self, error: BaseException) -> None:
        # what happened while it was down is read: the waiter reads at once
        self._rung.set()


def _carried(notice: ResultNotice) -> Result | None:
    """The result ``notice`` carries; ``None`` when it carries none the waiter can use
    (then the waiter reads it)."""
    if notice.fields is None:
        return None
    outcome, value, error, finished_at = notice.fields
    if outcome not in RESULT_OUTCOMES:
        return None
    try:
        decoded = decode_result(value)
    except ValueError:
        return None
    return Result(
        task_name=notice.task_name,
        instance_id=notice.instance_id,
        outcome=outcome,
        value=decoded,
        error=error,
        finished_at=finished_at,
    )
