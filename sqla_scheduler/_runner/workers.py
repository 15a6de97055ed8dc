"""The workers: each takes a held execution from the queue, runs it to one outcome
(``Executor.run_once``) and hands that outcome to the completer. This is the only place
outcomes are submitted; the loop and ``run_due`` both go through ``work``.

A pause (``hand_back``) hands back the queued executions of the task at once, and a
worker starts none of a task known to be paused (``PausedTasks``, no statement per start).

A stop request (``stop``, see ``stops``) records a queued execution ``cancelled`` at once;
a running handler sees ``ctx.cancelled``, and an async one is cancelled: each worker runs
in a cancel scope of its own (made again after a stop used it), which a stop cancels only
while the handler itself runs (``Held.cancel_handler``).

Stopping: queued executions are handed back untouched, running handlers get the grace
period, and a handler still running after it is cancelled and its execution handed back.
A handler that ignores its cancellation for ``STOP_GRACE`` more is left running, its
execution left picked for revival, and named in an error log: the workers run in a task
of their own, outside the loop's task group (``_detach``), so that ``run`` can return
without them and nothing a handler does keeps the scheduler from stopping.
"""

from __future__ import annotations

import contextvars
import logging
import math
from collections.abc import Awaitable, Callable
from datetime import timedelta
from functools import partial

import anyio
import anyio.abc
import sniffio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from sqla_scheduler._execution import Key
from sqla_scheduler._runner import outcomes
from sqla_scheduler._runner.completer import Completer
from sqla_scheduler._runner.executor import Executor
from sqla_scheduler._runner.held import Held, HeldSet, PausedTasks
from sqla_scheduler._runner.outcomes import Outcome
from sqla_scheduler._runner.picker import Picker
from sqla_scheduler._runner.stops import log_cancelled
from sqla_scheduler._runner.waker import Waker
from sqla_scheduler.clock import Clock
from sqla_scheduler.context import ShutdownSignal

__all__ = ["STOP_GRACE", "Workers"]

log = logging.getLogger("sqla_scheduler")

#: How long a stop waits, after ``shutdown_max_wait``, for cancelled handlers to end: a
#: handler still running then ignores its cancellation, and is left running (see
#: docs/loop.md, "Stopping").
STOP_GRACE = timedelta(seconds=2)


class Workers:
    """A queue of picked executions and the workers that run them."""

    def __init__(
        self,
        *,
        held: HeldSet,
        executor: Executor,
        completer: Completer,
        picker: Picker,
        waker: Waker,
        clock: Clock,
        shutdown: ShutdownSignal,
        grace: timedelta,
        paused: PausedTasks | None = None,
    ) -> None:
        self.held = held
        self.paused = paused if paused is not None else PausedTasks()
        self.executor = executor
        self.completer = completer
        self.picker = picker
        self.waker = waker
        self.clock = clock
        self.shutdown = shutdown
        self.grace = grace
        self._send: MemoryObjectSendStream[Held] | None = None
        self._idle = anyio.Event()
        #: The executions whose handlers ignored their cancellation and were left running
        #: when the workers stopped (``task/instance``).
        self.left_running: list[str] = []

    async def run(
        self, count: int, *, until: anyio.Event, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        """Run ``count`` workers until ``until`` is set, then wind down and hand back what
        is still held (``task_status`` is told once the workers run)."""
        self._send, receive = anyio.create_memory_object_stream[Held](math.inf)
        host = _Host()
        _detach(partial(self._serve, host, count, receive))
        task_status.started()
        graceful = False
        try:
            graceful = await _first(until, host.ended)
        finally:
            self.shutdown.set()
            self._send.close()
            await self._wind_down(host, graceful=graceful)
        if host.error is not None:
            raise host.error
        for held in self.held:  # still queued when the workers were cancelled
            if not held.taken and not held.completing:
                self.completer.submit(self._release(held))

    async def _serve(
        self, host: _Host, count: int, receive: MemoryObjectReceiveStream[Held]
    ) -> None:
        """The workers' own task: ``count`` workers until cancelled or the queue closes."""
        try:
            with host.scope:
                async with receive, anyio.create_task_group() as workers:
                    for _ in range(count):
                        workers.start_soon(self._worker, receive.clone())
        except BaseException as exc:  # raised by ``run``: nobody awaits this task
            host.error = exc
        finally:
            host.ended.set()

    def close(self) -> None:
        """Take no more executions: ``deliver`` hands back whatever it is given."""
        if self._send is not None:
            self._send.close()

    async def deliver(self, picked: list[Held]) -> None:
        """Queue picked executions for the workers; hand them back once stopped."""
        assert self._send is not None, "deliver is for a running loop"
        for held in picked:
            if held.execution.task_name in self.paused:
                # paused while it was picked, or resumed since this process last heard:
                # the picker reads the paused tasks again before it picks again
                self.picker.recheck_paused()
                self.held.hand_back(held)
                await self._finish(self._release(held))
                continue
            try:
                self._send.send_nowait(held)
            except anyio.ClosedResourceError:  # stopped while picking
                self.held.hand_back(held)
                await self._finish(self._release(held))

    def hand_back(self, task_name: str) -> int:
        """Hand back the queued executions of ``task_name`` (paused): unpicked as they
        were, no failure counted. Return how many; the workers skip them."""
        handed = 0
        for held in self.held:
            if held.execution.task_name == task_name and not held.taken and not held.completing:
                self.held.hand_back(held)
                self.completer.submit(self._release(held))  # marks it completing
                handed += 1
        if handed:
            log.info("handing back %d execution(s) of %s: it was paused", handed, task_name)
            self.waker.wake()  # room was made: the picker may pick other tasks' work
        return handed

    async def work(self, held: Held, *, stop: bool = False) -> None:
        """Run one held execution and hand its outcome on: the loop's and ``run_due``'s.

        ``stop`` (tests): as if ``cancel`` asked to stop it as its handler starts."""
        if held.completing:  # stopped while it waited (``stop``): its outcome is on its way
            await self._finish(None)
            return
        self.held.start(held)
        try:
            if held.stop_requested:  # requested before it was picked: it does not run
                outcome = self._cancelled(held, "before its handler started")
            else:
                if stop:
                    self.stop(held.key)
                outcome = await self.executor.run_once(held)
            if held.given_up:  # recorded cancelled after its grace
                log.info("%s ended after it was recorded cancelled: discarded", held.label)
                return
            if self.left_running:  # the loop stopped without it: nothing is recorded now
                log.warning("%s ended after the scheduler stopped; it will be revived", held.label)
                self.held.let_go(held)
                return
            await self._finish(outcome)
        except anyio.get_cancelled_exc_class():
            if held.stop_requested and not held.completing:  # cancelled by a stop
                self.completer.submit(self._cancelled(held, "its handler was cancelled"))
                with anyio.CancelScope(shield=True):
                    await self._finish(None)
            elif not held.completing and not self.left_running:  # cancelled by the wind-down
                # hand it back now (once left running, the loop is gone: revival will)
                self.completer.submit(self._release(held))
                with anyio.CancelScope(shield=True):
                    await self.completer.run_once()
            raise
        except Exception:
            log.exception("unexpected error running %s; it will be revived", held.label)
            self.held.let_go(held)
        finally:
            self.held.finish(held)
            if self.shutdown.is_set and not self.held.running:
                self._idle.set()
            if self.picker.wants_more():
                self.waker.wake()

    async def run_one(self, held: Held, *, stop: bool = False) -> None:
        """``work`` in a cancel scope of its own that a stop may cancel (``run_due``)."""
        with anyio.CancelScope() as scope:
            held.scope = scope
            await self.work(held, stop=stop)

    def stop(self, key: Key, version: int | None = None) -> Held | None:
        """Carry out ``cancel``'s request to stop the held execution ``key`` (only at
        ``version``, when given): one still queued is recorded ``cancelled`` without
        running; a running one's handler is told (``Held.request_stop``). Returns the
        execution whose handler now has its grace, else ``None``."""
        held = self.held.get(key)
        if held is None or held.completing or held.lost or held.stop_requested:
            return None
        if version is not None and held.execution.version != version:
            return None  # another process's now
        if not held.taken:
            held.stop_requested = True
            self.held.hand_back(held)
            self.completer.submit(self._cancelled(held, "before its handler started"))
            if self.picker.wants_more():
                self.waker.wake()  # room was made
            return None
        held.request_stop(cancel_worker=self.executor.tasks[key[0]].is_async)
        return held

    async def give_up(self, held: Held) -> None:
        """``held``'s handler still runs ``cancel_grace`` after its stop was requested:
        record it ``cancelled`` now. The worker stops waiting for a sync handler (which
        runs on in its thread); whatever the handler comes to is discarded."""
        if held.completing or held.lost or not self.held.holds(held):
            return
        held.given_up = True
        held.cancel_handler()
        self.completer.submit(self._cancelled(held, "its handler ran on past cancel_grace"))
        await self._finish(None)

    def _cancelled(self, held: Held, how: str) -> Outcome:
        """``held`` ends ``cancelled`` (``how``: what its handler did)."""
        task = self.executor.tasks[held.execution.task_name]
        decision = outcomes.cancelled(
            held.execution,
            keep_result=outcomes.keeps_result(task, held.execution),
            now=self.clock.now(),
            started_at=held.handler_started_at,
            reason=f"cancelled: {how}",
        )
        return Outcome(held=held, decision=decision, on_recorded=partial(log_cancelled, held))

    async def _worker(self, queue: anyio.abc.ObjectReceiveStream[Held]) -> None:
        async with queue:
            while True:
                # a stop cancels it (``Held.cancel_handler``): the next one is made then
                with anyio.CancelScope() as scope:
                    async for held in queue:
                        if held.completing:
                            continue  # handed back while it waited (``hand_back``, ``stop``)
                        if self.shutdown.is_set or held.execution.task_name in self.paused:
                            self.held.hand_back(held)
                            await self._finish(self._release(held))
                            continue
                        held.scope = scope
                        await self.work(held)
                    return  # the queue closed

    async def _finish(self, outcome: Outcome | None) -> None:
        """Hand ``outcome`` (if any) to the completer; commit what it holds now when the
        completer's loop does not run (``run_due``, or after the wind-down)."""
        if outcome is not None:
            self.completer.submit(outcome)
        if not self.completer.batching:
            await self.completer.flush()

    def _release(self, held: Held) -> Outcome:
        return Outcome(held=held, decision=outcomes.release(held.execution, self.clock.now()))

    async def _wind_down(self, host: _Host, *, graceful: bool) -> None:
        """Give running handlers up to the grace period, then cancel the workers, and give
        them ``STOP_GRACE`` to end; leave what is still running then.

        A cancelled worker hands its execution back before it ends (see ``work``);
        executions still queued are handed back by ``run`` after this.
        """
        try:
            grace = self.grace.total_seconds() if graceful else 0
            if self.held.running and grace:
                log.info("waiting up to %ss for %d execution(s)", grace, self.held.running)
                with anyio.move_on_after(grace):  # a cancellation (a forced stop) ends it
                    await self._idle.wait()
        finally:
            with anyio.CancelScope(shield=True):
                await self._end(host)

    async def _end(self, host: _Host) -> None:
        """Cancel the workers if handlers still run, and give them ``STOP_GRACE`` to end."""
        if self.held.running:
            for held in self.held:
                if held.taken and not held.completing:
                    log.warning("releasing %s: still running after shutdown_max_wait", held.label)
            host.scope.cancel()
        # else the workers hand back what is queued and end by themselves
        with anyio.move_on_after(STOP_GRACE.total_seconds()):
            await host.ended.wait()
        if host.ended.is_set():
            return
        self.left_running = sorted(
            held.label for held in self.held if held.taken and not held.completing
        )
        committing = sorted(held.label for held in self.held if held.completing)
        if not self.left_running and committing:
            # every handler has ended: what keeps a worker is the commit of an outcome (a
            # release, after a cancellation), which the database holds up; a stop does
            # not cut it off
            log.warning(
                "the stop waits for %d outcome(s) the database has not committed after %ss: %s",
                len(committing),
                STOP_GRACE.total_seconds(),
                ", ".join(committing),
            )
            await host.ended.wait()
            return
        log.error(
            "stopping without %d handler(s) that ignored their cancellation for %ss: %s "
            "left running; their executions stay picked, to be revived once their "
            "heartbeats are stale (dead_after)",
            len(self.left_running),
            STOP_GRACE.total_seconds(),
            ", ".join(self.left_running) or "none",
        )


class _Host:
    """The workers' task, detached from the loop's task group (see ``_detach``)."""

    def __init__(self) -> None:
        #: Cancels the workers.
        self.scope = anyio.CancelScope()
        #: Set when the workers have all ended.
        self.ended = anyio.Event()
        #: What ended them, other than their cancellation.
        self.error: BaseException | None = None


async def _first(until: anyio.Event, ended: anyio.Event) -> bool:
    """Wait for ``until`` or ``ended``; whether ``until`` was set."""
    async with anyio.create_task_group() as waiting:

        async def on_end() -> None:
            await ended.wait()
            waiting.cancel_scope.cancel()

        waiting.start_soon(on_end)
        await until.wait()
        waiting.cancel_scope.cancel()
    return until.is_set()


def _detach(fn: Callable[[], Awaitable[None]]) -> None:
    """Run ``fn`` in a task outside every task group of the caller, in a copy of its
    context: an asyncio task, or a trio system task. ``fn`` must not raise.

    Structured concurrency makes a task group wait for all its tasks, and a task that
    ignores its cancellation would make the loop's ``run`` wait forever. The event loop
    itself still waits for such a task when it closes: a process that must exit then
    does not close it (see ``worker.run_worker`` and ``Lifecycle.stop``).
    """
    if sniffio.current_async_library() == "trio":
        import trio

        trio.lowlevel.spawn_system_task(fn, context=contextvars.copy_context())
        return
    import asyncio

    async def main() -> None:
        await fn()

    task = asyncio.get_running_loop().create_task(main())  # in a copy of the context
    _detached.add(task)  # the loop keeps weak references only
    task.add_done_callback(_detached.discard)


_detached: set[object] = set()
