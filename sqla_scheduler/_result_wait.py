"""Waiting for a kept result: ``Scheduler.wait``.

A waiter reads the result, and until there is one waits for a sign that it may be there
now. On PostgreSQL the sign is the NOTIFY that the transaction recording a kept result
sends on the results' channel (``_result_store.record``): a ``Bell`` LISTENs for it on
a connection of its own, in a thread, from before the first read, so that no result is
missed between a read and the next wait. The NOTIFY carries the result itself unless it
is too long for one; then the waiter reads it. Elsewhere, or when the LISTEN cannot be made,
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
from sqla_scheduler._result import RESULT_OUTCOMES, Result, decode_result

__all__ = ["FIRST_POLL", "LAST_POLL", "Bell", "Waiting", "check_timeout"]

log = logging.getLogger("sqla_scheduler")

#: The first pause between two reads without a NOTIFY to wait for, in seconds.
FIRST_POLL = 0.01
#: The longest pause between two reads.
LAST_POLL = 1.0
#: How long a bell waits for its LISTEN to be in place before the first read.
LISTEN_READY = 2.0
#: How often the bell's thread looks up from its socket to see whether to stop.
_TICK = 0.25


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
    """Rings when the result of one execution is announced on ``channel`` (a LISTEN in a
    thread of its own); ``listening`` says whether it was put in place. Use as a context
    manager: ``__enter__`` returns once the LISTEN is in place (or failed), ``__exit__``
    lets the thread close its connection."""

    def __init__(
        self, connect_args: dict[str, Any], channel: str, task_name: str, instance_id: str
    ) -> None:
        self._connect_args = connect_args
        self._channel = channel
        self._expected = (task_name, instance_id)
        #: The result the NOTIFY carried, once the bell rang with one.
        self.result: Result | None = None
        self._rung = threading.Event()
        self._ready = threading.Event()
        self._stop = threading.Event()
        self.listening = False

    def __enter__(self) -> Bell:
        threading.Thread(target=self._listen, name="sqla-scheduler-wait", daemon=True).start()
        self._ready.wait(LISTEN_READY)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()

    def wait(self, seconds: float) -> Result | None:
        """Wait up to ``seconds`` for the bell (then it is reset): the result its NOTIFY
        carried, or ``None`` when the waiter must read (no NOTIFY came, or it carried only
        the key)."""
        rung = self._rung.wait(seconds)
        self._rung.clear()
        return self.result if rung else None

    def _listen(self) -> None:
        import psycopg
        from psycopg import sql

        try:
            with psycopg.connect(**self._connect_args, autocommit=True) as conn:
                conn.prepare_threshold = None  # two statements; a pooler may not keep them
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                self.listening = True
                self._ready.set()
                while not self._stop.is_set():
                    for notify in conn.notifies(timeout=_TICK, stop_after=1):
                        notice = read_result_notice(notify.payload)
                        if notice is not None and notice[:2] == self._expected:
                            self.result = _carried(notice)
                            self._rung.set()
        except Exception:
            if not self.listening:
                log.debug("wait: LISTEN failed; reading the result by polling", exc_info=True)
            self.listening = False
        finally:
            self._ready.set()


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
