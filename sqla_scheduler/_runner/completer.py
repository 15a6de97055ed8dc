"""The completer: records outcomes, many in one commit (group commit).

Workers finish at their own pace; the completer takes every outcome submitted since its
last commit and writes them together (``run_once``), so a busy scheduler commits fewer,
larger batches. An abandon is its own transaction, with the task's ``on_abandon`` hook.
A batch that fails is split to find the outcome that fails; one that keeps failing is
retried with backoff for as long as no other scheduler can have revived its row. What
was committed is counted for the charts (``stats``), flushed by a service of its own.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import replace
from datetime import datetime
from functools import partial

import anyio
import anyio.lowlevel
from sqlalchemy.exc import DBAPIError

from sqla_scheduler import _store
from sqla_scheduler._app_code import guard
from sqla_scheduler._bridge import SessionFactory
from sqla_scheduler._runner import outcomes
from sqla_scheduler._runner.held import HeldSet, log_lost
from sqla_scheduler._runner.outcomes import Abandon, Outcome
from sqla_scheduler._runner.service import Parts, Service
from sqla_scheduler._runner.stats import StatsWriter
from sqla_scheduler._runner.waker import Waker
from sqla_scheduler._store import Completion
from sqla_scheduler.context import ShutdownSignal
from sqla_scheduler.listeners import dispatch

__all__ = ["Completer"]

log = logging.getLogger("sqla_scheduler")

#: How many abandons are committed side by side (see ``Completer._abandon``).
ABANDONS_AT_ONCE = 2


class Completer(Service):
    """Commits submitted outcomes: in batches while ``run`` runs, else on ``flush``."""

    def __init__(
        self,
        parts: Parts,
        *,
        held: HeldSet,
        waker: Waker,
        shutdown: ShutdownSignal,
        limited: frozenset[str] = frozenset(),
        sessions: SessionFactory | None = None,
        stats: StatsWriter | None = None,
    ) -> None:
        super().__init__(parts)
        #: Counts each committed outcome for the charts; ``None`` with ``stats`` off.
        self.stats = stats
        #: Makes the session an ``on_abandon`` hook gets (see ``Database.transaction``).
        self.sessions = sessions
        #: The tasks with a ``max_concurrency``: an outcome of theirs frees a place that
        #: pickers here and, through NOTIFY, elsewhere may be waiting for.
        self.limited = limited
        self.held = held
        self.waker = waker
        self.shutdown = shutdown
        self._pending: list[Outcome] = []
        #: Abandons committed at once: each is a transaction (and a connection) of its own,
        #: and a burst of them must leave the other services their turn (see ``_pool``).
        self._abandoning = anyio.Semaphore(ABANDONS_AT_ONCE)
        self._ready = anyio.Event()
        self.batching = False
        """Whether ``run`` commits what is submitted; otherwise the submitter flushes."""

    def submit(self, outcome: Outcome) -> None:
        """Queue ``outcome`` for the next commit."""
        outcome.held.completing = True
        self._pending.append(outcome)
        self._ready.set()

    async def run(self) -> None:
        """Commit batches as outcomes arrive, until cancelled (after ``flush``)."""
        self.batching = True
        while True:
            await self._ready.wait()
            # One turn of the loop first: workers already able to run finish and join
            # this batch, so a busy scheduler commits fewer, larger batches.
            await anyio.lowlevel.checkpoint()
            self._ready = anyio.Event()
            await self.run_once()

    async def flush(self) -> None:
        """Commit everything submitted, and what that submits in turn; batching ends."""
        self.batching = False
        while self._pending:
            await self.run_once()

    async def run_once(self) -> None:
        """Commit what was submitted so far: one batch, and each abandon beside it."""
        batch, self._pending = self._pending, []
        records: list[tuple[Outcome, Completion]] = []
        abandons: list[tuple[Outcome, Abandon]] = []
        committed: list[tuple[Outcome, Completion]] = []
        for outcome in batch:
            if isinstance(outcome.decision, Completion):
                (committed if outcome.committed else records).append((outcome, outcome.decision))
            elif isinstance(outcome.decision, Abandon):
                abandons.append((outcome, outcome.decision))
            else:
                self.held.let_go(outcome.held)
        if committed:  # with a transactional handler's writes: only what follows is left
            self._recorded(committed, [True] * len(committed))
        if not abandons:
            if records:
                await self._commit(records, lane="completer")
        else:
            async with anyio.create_task_group() as group:
                if records:
                    group.start_soon(partial(self._commit, records, lane="completer"))
                for outcome, abandon in abandons:
                    group.start_soon(self._abandon, outcome, abandon)
        if self.waker.due():
            self.waker.wake()  # room was made while work waits for it: the picker may pick

    async def _commit(
        self, batch: list[tuple[Outcome, Completion]], lane: str | None = None
    ) -> None:
        completions = [completion for _, completion in batch]
        # A batch of plain removals is one DELETE: it needs no transaction around it.
        single = all(
            c.recorded_alone(self.config.history) and c.execution.task_name not in self.limited
            for c in completions
        )
        try:
            async with self.held.writes.statement():  # not beside a heartbeat
                recorded = await self.db.shielded(
                    partial(
                        _store.complete,
                        statements=self.statements,
                        batch=completions,
                        history=self.config.history,
                        notify=self.limited,
                    ),
                    autocommit=single,
                    lane=None if lane is None else f"{lane}{'-autocommit' if single else ''}",
                )
        except Exception:
            if len(batch) == 1:
                recorded = await self._retry(completions[0])
            else:  # find the one that fails, commit the others
                log.warning(
                    "committing %d outcomes together failed; committing them one by one",
                    len(batch),
                    exc_info=True,
                )
                for record in batch:
                    await self._commit([record], lane=lane)
                return
        self._recorded(batch, recorded)

    def _recorded(self, batch: list[tuple[Outcome, Completion]], recorded: list[bool]) -> None:
        """After a commit: let the executions go, tell of what was recorded, and wake the
        picker for what comes next."""
        earliest: datetime | None = None
        freed = False
        self.held.progressed()
        for (outcome, completion), ok in zip(batch, recorded, strict=True):
            self.held.let_go(outcome.held)
            freed = freed or completion.execution.task_name in self.limited
            if not ok:
                if completion.kind != "release" or not outcome.held.lost:
                    log_lost(completion.execution, completion.kind)
                continue
            if outcome.on_recorded is not None:
                outcome.on_recorded()
            if self.stats is not None and completion.outcome is not None:
                self.stats.count(
                    completion.execution, completion.outcome, completion.now, completion.started_at
                )
            at = _next_time(completion)
            if at is not None and (earliest is None or at < earliest):
                earliest = at
        if earliest is not None:
            self.waker.wake_at(earliest)
        if freed:
            self.waker.wake()  # a limited task's place is free: its due work may be picked

    async def _retry(self, completion: Completion) -> list[bool]:
        """Retry committing one outcome with backoff, for as long as the row cannot have
        been revived elsewhere (``dead_after``); once stopping, do not wait."""
        execution = completion.execution
        give_up = time.monotonic() + self.config.dead_after.total_seconds()
        delay = 0.1
        attempt = 1
        error: BaseException | None = sys.exc_info()[1]
        if isinstance(error, DBAPIError):  # the database answered: an outage, no stall
            self.held.progressed()
        while True:
            if self.shutdown.is_set() or time.monotonic() + delay > give_up:
                log.error(
                    "could not record the outcome of %s/%s (%d attempt(s)); it will be revived",
                    execution.task_name,
                    execution.instance_id,
                    attempt,
                    exc_info=error,
                )
                return [False]
            log.warning(
                "could not record the outcome of %s/%s; retrying in %.1fs",
                execution.task_name,
                execution.instance_id,
                delay,
                exc_info=error,
            )
            await anyio.sleep(delay)  # a stop may cut this short: the row is then revived
            attempt += 1
            try:
                return await self.db.shielded(
                    partial(
                        _store.complete,
                        statements=self.statements,
                        batch=[completion],
                        history=self.config.history,
                        notify=self.limited,
                    )
                )
            except Exception as exc:
                error = exc
                delay = min(delay * 2, 5.0)
                if isinstance(exc, DBAPIError):  # the database answered: an outage, no stall
                    self.held.progressed()

    async def _abandon(self, outcome: Outcome, abandon: Abandon) -> None:
        """Remove the row and run the ``on_abandon`` hook in one commit.

        The hook and the listeners get the context with ``last_error`` the error of the
        attempt that failed last: the one that made the execution abandoned.
        """
        assert outcome.context is not None  # the executor sets it on every abandon
        context = replace(outcome.context, last_error=abandon.last_error)
        execution = abandon.execution
        now = self.clock.now()
        remove = partial(
            _store.abandon,
            statements=self.statements,
            execution=replace(execution, started_at=abandon.started_at),
            now=now,
            failures=abandon.failures,
            error=abandon.last_error,
            history=self.config.history,
            keep_result=abandon.keep_result,
        )
        hook = outcome.on_abandon
        try:
            async with self._abandoning:
                removed = await self.db.remove_with_hook(
                    remove,
                    None if hook is None else guard(execution.task_name, "on_abandon", hook),
                    context,
                    self.sessions,
                )
        except Exception as exc:  # whatever the hook raised (see ``_app_code``), or the database
            if isinstance(exc, DBAPIError):  # the database answered: an outage, no stall
                self.held.progressed()
            retry = outcomes.abandon_failed(abandon, now=self.clock.now(), config=self.config)
            assert retry.at is not None
            log.exception(
                "on_abandon of %s/%s failed; the execution is kept and abandoning it will be "
                "retried at %s",
                execution.task_name,
                execution.instance_id,
                retry.at.isoformat(),
            )
            self.submit(Outcome(held=outcome.held, decision=retry))
            return
        self.held.let_go(outcome.held)
        self.held.progressed()
        if not removed:
            log_lost(execution, "abandon")
            return
        if self.stats is not None:
            self.stats.count(execution, "abandoned", now, abandon.started_at)
        if execution.task_name in self.limited:
            self.waker.wake()
        log.warning(
            "abandoned %s/%s after %d consecutive failure(s)",
            execution.task_name,
            execution.instance_id,
            abandon.failures,
        )
        dispatch(self.listeners, "on_abandon", context, abandon.error)


def _next_time(completion: Completion) -> datetime | None:
    """The earliest time recording ``completion`` makes work due: a retry, a snooze, a next
    run, or what the handler scheduled (due now without a time); ``None`` when it makes
    none."""
    times = [i.execution_time or completion.now for i in completion.scheduled]
    if completion.plans or completion.execution.group_id is not None:
        times.append(completion.now)  # members to run, or a callback its finish made due
    if completion.at is not None and completion.kind in ("succeed", "fail", "snooze"):
        times.append(completion.at)
    return min(times, default=None)
