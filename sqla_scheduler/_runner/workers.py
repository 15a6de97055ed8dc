"""The workers: each takes a held execution from the queue, runs it to one outcome
(``Executor.run_once``) and hands that outcome to the completer. This is the only place
outcomes are submitted; the loop and ``run_due`` both go through ``work``.

A pause (``hand_back``) hands back the queued executions of the task at once, and a
worker starts none of a task known to be paused (``PausedTasks``, no statement per start).

Stopping: queued executions are handed back untouched, running handlers get the grace
period, and a handler still running after it is cancelled and its execution handed back.
"""

from __future__ import annotations

import logging
import math
from datetime import timedelta

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectSendStream

from sqla_scheduler._runner import outcomes
from sqla_scheduler._runner.completer import Completer
from sqla_scheduler._runner.executor import Executor
from sqla_scheduler._runner.held import Held, HeldSet, PausedTasks
from sqla_scheduler._runner.outcomes import Outcome
from sqla_scheduler._runner.picker import Picker
from sqla_scheduler._runner.waker import Waker
from sqla_scheduler.clock import Clock
from sqla_scheduler.context import ShutdownSignal

__all__ = ["Workers"]

log = logging.getLogger("sqla_scheduler")


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

    async def run(
        self, count: int, *, until: anyio.Event, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        """Run ``count`` workers until ``until`` is set, then wind down and hand back what
        is still held (``task_status`` is told once the workers run)."""
        self._send, receive = anyio.create_memory_object_stream[Held](math.inf)
        async with receive, anyio.create_task_group() as workers:
            for _ in range(count):
                workers.start_soon(self._worker, receive.clone())
            task_status.started()
            graceful = False
            try:
                await until.wait()
                graceful = True
            finally:
                self.shutdown.set()
                self._send.close()
                await self._wind_down(workers.cancel_scope, graceful=graceful)
        for held in self.held:  # still queued when the workers were cancelled
            if not held.taken and not held.completing:
                self.completer.submit(self._release(held))

    def close(self) -> None:
        """Take no more executions: ``deliver`` hands back whatever it is given."""
        if self._send is not None:
            self._send.close()

    async def deliver(self, picked: list[Held]) -> None:
        """Queue picked executions for the workers; hand them back once stopped."""
        assert self._send is not None, "deliver is for a running loop"
        for held in picked:
            if held.execution.task_name in self.paused:  # paused while it was picked
                self.held.outstanding -= 1
                await self._finish(self._release(held))
                continue
            try:
                self._send.send_nowait(held)
            except anyio.ClosedResourceError:  # stopped while picking
                self.held.outstanding -= 1
                await self._finish(self._release(held))

    def hand_back(self, task_name: str) -> int:
        """Hand back the queued executions of ``task_name`` (paused): unpicked as they
        were, no failure counted. Return how many; the workers skip them."""
        handed = 0
        for held in self.held:
            if held.execution.task_name == task_name and not held.taken and not held.completing:
                self.held.outstanding -= 1
                self.completer.submit(self._release(held))  # marks it completing
                handed += 1
        if handed:
            log.info("handing back %d execution(s) of %s: it was paused", handed, task_name)
            self.waker.wake()  # room was made: the picker may pick other tasks' work
        return handed

    async def work(self, held: Held) -> None:
        """Run one held execution and hand its outcome on: the loop's and ``run_due``'s."""
        self.held.running += 1
        held.taken = True
        try:
            await self._finish(await self.executor.run_once(held))
        except anyio.get_cancelled_exc_class():
            if not held.completing:  # cancelled by the wind-down: hand it back now
                self.completer.submit(self._release(held))
                with anyio.CancelScope(shield=True):
                    await self.completer.run_once()
            raise
        except Exception:
            log.exception("unexpected error running %s; it will be revived", held.label)
            self.held.let_go(held)
        finally:
            self.held.running -= 1
            self.held.outstanding -= 1
            if self.shutdown.is_set and not self.held.running:
                self._idle.set()
            if self.picker.wants_more():
                self.waker.wake()

    async def _worker(self, queue: anyio.abc.ObjectReceiveStream[Held]) -> None:
        async with queue:
            async for held in queue:
                if held.completing:
                    continue  # handed back while it waited (``hand_back``)
                if self.shutdown.is_set or held.execution.task_name in self.paused:
                    self.held.outstanding -= 1
                    await self._finish(self._release(held))
                    continue
                await self.work(held)

    async def _finish(self, outcome: Outcome) -> None:
        """Hand ``outcome`` to the completer; commit it now when the completer's loop
        does not run (``run_due``, or after the wind-down)."""
        self.completer.submit(outcome)
        if not self.completer.batching:
            await self.completer.flush()

    def _release(self, held: Held) -> Outcome:
        return Outcome(held=held, decision=outcomes.release(held.execution, self.clock.now()))

    async def _wind_down(self, workers: anyio.CancelScope, *, graceful: bool) -> None:
        """Give running handlers up to the grace period, then cancel the workers.

        A cancelled worker hands its execution back before it ends (see ``work``);
        executions still queued are handed back by ``run`` after this.
        """
        with anyio.CancelScope(shield=True):
            grace = self.grace.total_seconds() if graceful else 0
            if self.held.running and grace:
                log.info("waiting up to %ss for %d execution(s)", grace, self.held.running)
                with anyio.move_on_after(grace):
                    await self._idle.wait()
            if not self.held.running:
                return  # the workers hand back what is queued and end by themselves
            for held in self.held:
                if held.taken and not held.completing:
                    log.warning("releasing %s: still running after shutdown_max_wait", held.label)
            workers.cancel()
