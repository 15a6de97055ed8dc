"""Long-lived threads for sync handlers, handing finished work back to the loop in batches.

``anyio.to_thread.run_sync`` wakes the event loop once per call. For short sync handlers
under a backlog that wake-up (a pipe write, a loop turn, a future) costs more than the
handler, so the runner uses this pool instead: a job is one put on a queue; a finishing
thread appends the job to a ready list and asks the loop to look at that list only when no
such request is already pending, so many handlers finishing close together cost one
wake-up.

A waiter that is cancelled stops waiting; its handler runs on in its thread, which is
then busy until the handler returns (the pool starts another thread when none is idle).
Threads are daemons and leave after a while without work, so a handler stuck forever
never keeps the process from exiting.
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import sniffio

T = TypeVar("T")

#: How long an idle thread waits for work before it ends.
_IDLE_SECONDS = 10.0


class _Job:
    __slots__ = ("arg", "context", "done", "error", "fn", "result")

    def __init__(self, fn: Callable[[Any], Any], arg: Any) -> None:
        self.fn = fn
        self.arg = arg
        self.context = contextvars.copy_context()
        self.done = anyio.Event()
        self.result: Any = None
        self.error: BaseException | None = None


class HandlerThreads:
    """Runs ``fn(arg)`` calls in threads for the event loop that first uses it."""

    def __init__(self, name: str = "sqla-scheduler-handler") -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._ready: deque[_Job] = deque()
        self._lock = threading.Lock()
        self._idle = 0
        self._wake_pending = False
        self._call_soon: Callable[[Callable[[], None]], object] | None = None

    async def run(self, fn: Callable[[Any], T], arg: Any) -> T:
        """``fn(arg)`` in one of the pool's threads, in a copy of the caller's context."""
        if self._call_soon is None:
            self._call_soon = call_soon_threadsafe()
        job = _Job(fn, arg)
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # promised this job
        self._jobs.put(job)
        if start:
            threading.Thread(target=self._serve, name=self._name, daemon=True).start()
        await job.done.wait()
        if job.error is not None:
            try:
                raise job.error
            finally:
                job.error = None  # no reference cycle through the traceback
        result: T = job.result
        return result

    def close(self) -> None:
        """Tell idle threads to leave; busy ones leave once their handler returns."""
        with self._lock:
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._jobs.put(None)

    def _serve(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=_IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if self._idle == 0:  # a job was promised to an idle thread: take it
                        continue
                    self._idle -= 1
                return
            if job is None:
                return
            try:
                job.result = job.context.run(job.fn, job.arg)
            except BaseException as exc:  # handed to the waiter, who raises it
                job.error = exc
            with self._lock:
                self._idle += 1
                self._ready.append(job)
                wake = not self._wake_pending
                self._wake_pending = True
            if wake:
                assert self._call_soon is not None
                try:
                    self._call_soon(self._deliver)
                except RuntimeError:  # the loop has closed: nobody is waiting any more
                    return

    def _deliver(self) -> None:
        """In the loop: wake the waiters of every finished job."""
        with self._lock:
            self._wake_pending = False
            ready, self._ready = self._ready, deque()
        for job in ready:
            job.done.set()


def call_soon_threadsafe() -> Callable[[Callable[[], None]], object]:
    """How a thread schedules a callback on the running event loop (asyncio or trio)."""
    if sniffio.current_async_library() == "trio":
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon
    import asyncio

    return asyncio.get_running_loop().call_soon_threadsafe
