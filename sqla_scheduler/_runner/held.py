"""The executions this process holds: picked, and not yet handed back; and the tasks it
knows to be paused.

The picker adds to the held set, workers start and finish what it holds (or hand it back),
the completer lets it go, the heartbeater reads it; each through the set's verbs, which
alone change its counts. With the paused tasks (which the listener and the picker learn,
and the workers read before each start) and the ``Waker``, it is the state the services
share.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime

import anyio

from sqla_scheduler._execution import Execution, Key
from sqla_scheduler.context import ShutdownSignal

__all__ = ["Held", "HeldSet", "PausedTasks", "RowWrites", "log_lost", "versioned_keys"]

log = logging.getLogger("sqla_scheduler")


@dataclass(eq=False, slots=True)
class Held:
    """An execution this scheduler has picked and not yet handed back."""

    execution: Execution
    #: A worker has taken it from the queue (its handler may be running).
    taken: bool = False
    #: Its version moved under us (revived elsewhere); the outcome will not be committed.
    lost: bool = False
    #: Its outcome is being committed; a heartbeat miss now is not a loss.
    completing: bool = False
    #: The latest its handler may start (a rate-limited task's, whose start was counted
    #: when it was picked: see ``_store.rates``); later, it is handed back instead.
    start_by: datetime | None = None
    #: ``cancel`` asked this process to stop it (``request_stop``): it ends ``cancelled``.
    stop_requested: bool = False
    #: Recorded ``cancelled`` while its handler ran on past ``cancel_grace``: what the
    #: handler comes to is discarded.
    given_up: bool = False
    #: Its handler's ``ctx.cancelled``, set by ``request_stop``.
    cancelled: ShutdownSignal = field(default_factory=ShutdownSignal)
    #: The cancel scope of the worker running it, while one does (see ``Workers``).
    scope: anyio.CancelScope | None = None
    #: When its handler started, while it runs (``enter_handler``).
    handler_started_at: datetime | None = None
    #: Whether its handler runs now: a stop may cancel its worker only then, when nothing
    #: but application code is cut short.
    _in_handler: bool = False
    #: Whether a stop cancels its worker (an async handler's: a sync one sees ``cancelled``).
    _cancels_worker: bool = False

    @property
    def key(self) -> Key:
        return (self.execution.task_name, self.execution.instance_id)

    @property
    def label(self) -> str:
        """``task/instance``, as log lines name an execution."""
        return f"{self.execution.task_name}/{self.execution.instance_id}"

    def request_stop(self, *, cancel_worker: bool) -> None:
        """Stop it: its handler sees ``ctx.cancelled`` set and, with ``cancel_worker`` (an
        async handler), is cancelled while it runs, at once or as it starts."""
        self.stop_requested = True
        self.cancelled.set()
        self._cancels_worker = cancel_worker
        if cancel_worker:
            self.cancel_handler()

    def enter_handler(self, started_at: datetime) -> None:
        """Its handler starts now (at ``started_at``): one whose stop was requested already
        is cancelled at its first wait."""
        self.handler_started_at = started_at
        self._in_handler = True
        if self._cancels_worker:
            self.cancel_handler()

    def leave_handler(self) -> None:
        """Its handler has returned or raised."""
        self._in_handler = False

    def cancel_handler(self) -> None:
        """Cancel its worker if its handler runs now (else nothing): the worker's wait for
        it ends (a sync handler runs on in its thread)."""
        if self._in_handler and self.scope is not None:
            self.scope.cancel()

    def lose(self, what: str) -> None:
        """Note that another scheduler took this execution over, as recording ``what`` (a
        start, a heartbeat) found: its outcome will not be committed."""
        self.lost = True
        log_lost(self.execution, what)


class RowWrites:
    """Keeps a heartbeat's statement apart from this process's other statements on its
    held rows (start records, completion commits).

    Each writes many held rows in one statement, locking them in its own order: a
    heartbeat's ``UPDATE`` beside a ``DELETE`` of some of the same rows could deadlock,
    which PostgreSQL breaks after ``deadlock_timeout`` (a second), aborting one of them.
    The others run side by side; a heartbeat waits for those under way and, while it
    waits or runs, new ones wait for it (a heartbeat is short, and rare).
    """

    def __init__(self) -> None:
        self._changed = anyio.Condition()
        self._writing = 0
        self._beating = False

    @asynccontextmanager
    async def statement(self) -> AsyncIterator[None]:
        """Around a start record or a completion commit. Shielded from cancellation, as
        the statement itself is (``Database.shielded``): an outcome committed as the loop
        stops (a release after ``shutdown_max_wait``) must not be lost to the wait."""
        with anyio.CancelScope(shield=True):
            async with self._changed:
                while self._beating:
                    await self._changed.wait()
                self._writing += 1
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with self._changed:
                    self._writing -= 1
                    self._changed.notify_all()

    @asynccontextmanager
    async def heartbeat(self) -> AsyncIterator[None]:
        """Around a heartbeat: from when no other statement is under way to its end."""
        async with self._changed:
            while self._beating:
                await self._changed.wait()
            self._beating = True
            try:
                while self._writing:
                    await self._changed.wait()
            except BaseException:
                self._beating = False
                self._changed.notify_all()
                raise
        try:
            yield
        finally:
            with anyio.CancelScope(shield=True):
                async with self._changed:
                    self._beating = False
                    self._changed.notify_all()


class HeldSet:
    """The held executions by key, with the counts that size the next pick, and the
    gate that keeps heartbeats apart from other writes of them (``writes``).

    The services change the counts through its verbs only, one per step of a held
    execution (as db-scheduler's ``CurrentlyExecuting``): the picker ``hold``s what it
    picked; a worker ``start``s one and ``finish``es it, or ``hand_back``s one that will
    not run here; the completer ``let_go``es each once its outcome is recorded."""

    def __init__(self) -> None:
        self._by_key: dict[Key, Held] = {}
        self.writes = RowWrites()
        self._outstanding = 0
        self._running = 0
        self._progressed_at = time.monotonic()
        #: Since when this process has owed work of its own (see ``owed_for``).
        self._owing_since: float | None = None

    @property
    def outstanding(self) -> int:
        """Picked executions whose handler has not finished (queued or running)."""
        return self._outstanding

    @property
    def running(self) -> int:
        """Executions whose handler a worker is running now."""
        return self._running

    @property
    def progressed_at(self) -> float:
        """When a worker last took an execution to run, or an outcome was last recorded
        or refused by the database (``time.monotonic``): what liveness calls progress."""
        return self._progressed_at

    def hold(self, execution: Execution, *, start_by: datetime | None = None) -> Held:
        """Hold a picked ``execution`` (outstanding until it finishes or is handed back);
        ``start_by``: the latest its handler may start (see ``Held.start_by``)."""
        # a stop requested before this pick (its process died, or its handler finished
        # first): it is recorded cancelled without running (``Workers.work``)
        stopped = execution.stop_requested_at is not None
        held = Held(execution, start_by=start_by, stop_requested=stopped)
        self._by_key[held.key] = held
        self._outstanding += 1
        return held

    def start(self, held: Held) -> None:
        """A worker takes ``held`` to run its handler: it is running, and that is progress."""
        held.taken = True
        self._running += 1
        self._progressed_at = time.monotonic()

    def finish(self, held: Held) -> None:
        """The worker that ``start``ed ``held`` is done with it, whatever its handler came
        to: neither running nor outstanding. It stays held until ``let_go``."""
        self._running -= 1
        self._outstanding -= 1

    def hand_back(self, held: Held) -> None:
        """``held`` will not run here (its task is paused, or the workers stop): no longer
        outstanding. It stays held until its release is recorded (``let_go``)."""
        self._outstanding -= 1

    def let_go(self, held: Held) -> None:
        """Forget ``held``: its outcome is recorded, or it is no longer ours."""
        self._by_key.pop(held.key, None)

    def progressed(self) -> None:
        """Note progress: a start, or an outcome recorded (or the database's refusal)."""
        self._progressed_at = time.monotonic()

    def owed_for(self, concurrency: int) -> float:
        """How long this process has owed work of its own and made no progress, in
        seconds; 0 when it owes none.

        It owes work while an outcome waits to be committed, or an execution waits to
        start while a worker is free: neither waits for a handler. Executions queued
        behind ``concurrency`` running handlers are not owed work.
        """
        now = time.monotonic()
        completing = waiting = 0
        for held in self._by_key.values():
            if held.completing:
                completing += 1
            elif not held.taken:
                waiting += 1
        if not completing and not (waiting and self._running < concurrency):
            self._owing_since = None
            return 0.0
        if self._owing_since is None:
            self._owing_since = now
        return now - max(self._progressed_at, self._owing_since)

    def get(self, key: Key) -> Held | None:
        """The execution held under ``key``, if any."""
        return self._by_key.get(key)

    def holds(self, held: Held) -> bool:
        """Whether ``held`` is still the execution held under its key."""
        return self._by_key.get(held.key) is held

    def __iter__(self) -> Iterator[Held]:
        return iter(list(self._by_key.values()))

    def __len__(self) -> int:
        return len(self._by_key)


class PausedTasks:
    """The task names this process knows to be paused: what it heard (a NOTIFY, a pause
    in this process) and what it read from the table at its last refresh.

    The table is the truth (every pick reads it); this copy lets a worker refuse to start
    an execution picked just before a pause without a statement per start. A refresh
    keeps what was heard while it read: a notice that arrived meanwhile is newer.
    """

    def __init__(self) -> None:
        self._names: set[str] = set()
        #: What was heard since the refresh under way began (``None``: none is).
        self._heard: dict[str, bool] | None = None

    def __contains__(self, task_name: object) -> bool:
        return task_name in self._names

    def learn(self, task_name: str, paused: bool) -> None:
        """Hear that ``task_name`` was paused or resumed."""
        if self._heard is not None:
            self._heard[task_name] = paused
        if paused:
            self._names.add(task_name)
        else:
            self._names.discard(task_name)

    def begin_refresh(self) -> None:
        """Start reading the table: what is heard from now on overrides what it says."""
        self._heard = {}

    def end_refresh(self, names: Iterable[str] | None) -> set[str]:
        """Take the names read from the table (``None``: the read failed) with what was
        heard meanwhile; return the names paused that were not known to be before."""
        heard, self._heard = self._heard or {}, None
        if names is None:
            return set()
        fresh = set(names)
        for task_name, paused in heard.items():
            if paused:
                fresh.add(task_name)
            else:
                fresh.discard(task_name)
        newly = fresh - self._names
        self._names = fresh
        return newly


def versioned_keys(held: Iterable[Held]) -> list[tuple[str, str, int]]:
    """(task, instance, version) of each execution, as the store's keyed statements take."""
    return [(h.execution.task_name, h.execution.instance_id, h.execution.version) for h in held]


def log_lost(execution: Execution, what: str) -> None:
    """Log that ``what`` (a start, heartbeat or outcome) of ``execution`` was not recorded."""
    log.warning(
        "version mismatch: %s of %s/%s (version %d) not recorded; another scheduler "
        "took it over (it was probably revived as dead)",
        what,
        execution.task_name,
        execution.instance_id,
        execution.version,
    )
