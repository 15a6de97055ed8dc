"""The executor: runs one held execution to one outcome.

``run_once(held)`` goes through three phases. ``prepare`` records the start where that
matters, decodes the payload and builds the context, or finds that the execution is not to
run; ``attempt`` runs the handler once (in its transaction, through the interceptors, held
to its timeout; a sync one on a handler thread); ``decide`` asks the outcome policy
(``outcomes``) what the result or error comes to. It records no outcome itself (but a
transactional handler's success, with the handler's writes): it returns it, and the
worker loop hands it to the completer.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import anyio
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from sqla_scheduler import _store
from sqla_scheduler._bridge import SessionFactory, Transaction
from sqla_scheduler._execution import Execution, Key
from sqla_scheduler._runner import outcomes
from sqla_scheduler._runner.calls import HandlerCalls
from sqla_scheduler._runner.failures import first_line
from sqla_scheduler._runner.held import Held, RowWrites, log_lost, versioned_keys
from sqla_scheduler._runner.outcomes import Outcome
from sqla_scheduler._runner.progress import ProgressReports
from sqla_scheduler._runner.service import Parts, Service
from sqla_scheduler._runner.stops import log_cancelled, stopped_by
from sqla_scheduler._runner.waker import AHEAD
from sqla_scheduler._store import Completion
from sqla_scheduler._threads import HandlerThreads
from sqla_scheduler.context import ExecutionContext, ShutdownSignal
from sqla_scheduler.exceptions import InvalidScheduleError, Snooze
from sqla_scheduler.groups import Group
from sqla_scheduler.interceptors import ExecutionInterceptor
from sqla_scheduler.listeners import dispatch
from sqla_scheduler.tasks import Handler, Task

__all__ = ["Attempted", "Executor", "Prepared"]

log = logging.getLogger("sqla_scheduler")


@dataclass(eq=False, slots=True, kw_only=True)
class Prepared:
    """An execution ready for its attempt (``Executor.prepare``)."""

    held: Held
    task: Task[Any]
    #: What decides its outcome, read before it runs.
    policy: outcomes.Policy
    #: The context its handler gets (a transactional one's gets its session on top).
    context: ExecutionContext[Any]


@dataclass(eq=False, slots=True, kw_only=True)
class Attempted:
    """What one attempt of a handler came to (``Executor.attempt``), for ``decide``."""

    #: The context the handler got.
    context: ExecutionContext[Any]
    #: What the handler returned; ``None`` when it failed.
    result: Any
    #: What the handler, an interceptor or recording its success raised; ``None`` if none.
    error: BaseException | None
    #: When the attempt started and ended (by the clock), and how long it took.
    started_at: datetime
    ended_at: datetime
    duration: timedelta


class Executor(Service):
    """Runs held executions' handlers; one call of ``run_once`` per execution."""

    def __init__(
        self,
        parts: Parts,
        *,
        tasks: Mapping[str, Task[Any]],
        shutdown: ShutdownSignal,
        threads: HandlerThreads,
        writes: RowWrites,
        interceptors: Sequence[ExecutionInterceptor] = (),
        sessions: SessionFactory | None = None,
        limited: frozenset[str] = frozenset(),
        on_handed_back: Callable[[], None] | None = None,
        progress: ProgressReports | None = None,
    ) -> None:
        super().__init__(parts)
        self.tasks = tasks
        #: Makes a transactional handler's session (see ``Database.transaction``).
        self._sessions = sessions
        #: The tasks with a ``max_concurrency`` (whose outcomes notify: see ``_store.complete``).
        self._limited = limited
        self.shutdown = shutdown
        #: Upcasts old payloads (see ``_decode``).
        self._threads = threads
        #: Calls the handlers (through the interceptors, held to their timeouts).
        self._calls = HandlerCalls(threads=threads, interceptors=interceptors)
        #: Start records are kept apart from heartbeats (see ``RowWrites``).
        self._starts = _StartRecorder(parts, writes)
        #: Called once a rate-limited execution handed back for starting late is due again
        #: (the picker's wake-up: it was picked by this process, no other hears of it).
        self._on_handed_back = on_handed_back
        #: Where the handlers' progress reports go (none without a writer).
        self._progress = progress

    async def run_once(self, held: Held) -> Outcome:
        """Run ``held``'s handler (when it may run) and return what it came to, in three
        phases: ``prepare``, ``attempt`` and ``decide``."""
        prepared = await self.prepare(held)
        if isinstance(prepared, Outcome):  # it does not run
            return prepared
        attempted = await self.attempt(prepared)
        if isinstance(attempted, Outcome):  # committed with its transaction, or not run
            return attempted
        return self.decide(prepared, attempted)

    async def prepare(self, held: Held) -> Prepared | Outcome:
        """Make ``held`` ready for its attempt, or return the outcome it comes to instead.

        Records the start of an execution that was in trouble before (``_StartRecorder``),
        waits for a time picked just ahead, decodes the payload, reads its outcome policy
        (``outcomes.policy_of``) and builds the context. An execution taken over (or whose
        start cannot be recorded), undecodable, spent (``outcomes.spent``) or past its rate
        limit's start (``_late``) does not run. One that runs is told to the listeners
        (``on_start``)."""
        execution = held.execution
        if execution.last_failure is not None:
            # Recorded before the wait for the time below, so that its round trip does
            # not delay the start: a process that dies in those milliseconds counts the
            # attempt, as it would a moment later.
            refused = await self._starts.record(held)
            if refused is not None:
                return refused
        early = (execution.execution_time - self.clock.now()).total_seconds()
        if early > 0:  # picked just ahead of its time (see ``waker.AHEAD``): wait for it
            await anyio.sleep(min(early, AHEAD.total_seconds()))
        task = self.tasks[execution.task_name]
        try:
            payload = await self._decode(task, execution)
            policy = outcomes.policy_of(task, execution, self.config)  # its schedule must read
        except Exception as exc:  # whatever decoding raised (see ``_app_code``): it cannot run
            return Outcome(
                held=held,
                decision=outcomes.undecodable(task, execution, exc, self.clock.now()),
                on_recorded=partial(_log_undecodable, execution, exc),
            )
        group = None if execution.awaits is None else await self._group(execution.awaits)
        context = _context(task, held, payload, group, self.shutdown, self._progress)
        spent = outcomes.spent(policy)
        if spent is not None:
            return Outcome(held=held, decision=spent, context=context, on_abandon=task.on_abandon)
        late = self._late(held)
        if late is not None:
            return late
        if self.listeners:
            dispatch(self.listeners, "on_start", context)
        return Prepared(held=held, task=task, policy=policy, context=context)

    async def attempt(self, prepared: Prepared) -> Attempted | Outcome:
        """Run the handler once, through the interceptors and held to its timeout
        (``HandlerCalls``); a transactional task's in its transaction
        (``_attempt_in_transaction``).

        Returns what happened, for ``decide``. A transactional handler's success is
        decided before its transaction ends and committed with its writes: that outcome is
        returned, as is a release when the transaction does not begin (it did not run)."""
        task, context = prepared.task, prepared.context
        if task.transactional:
            return await self._attempt_in_transaction(prepared)
        started_at, started = self.clock.now(), time.monotonic()
        result, error = await _run_handler(self._calls, prepared, started_at, context, task.handler)
        return self._attempted(context, result, error, started_at, started)

    async def _attempt_in_transaction(self, prepared: Prepared) -> Attempted | Outcome:
        """``attempt`` of a transactional task: its handler's session is the transaction's
        (a sync handler's, its thread's while it runs). What happened is returned with the
        transaction rolled back, the handler's writes gone with the attempt; a success is
        committed with them (``_commit``)."""
        held, task = prepared.held, prepared.task
        started_at, started = self.clock.now(), time.monotonic()
        async with AsyncExitStack() as stack:
            try:
                # outside the services' budget of connections: at most ``concurrency`` run
                transaction = await stack.enter_async_context(
                    self.db.transaction(self._sessions, budgeted=False)
                )
            except (DBAPIError, PoolTimeout) as exc:  # its transaction did not begin: not run
                log.warning(
                    "%s: its transaction could not begin (%s); handing it back",
                    held.label,
                    first_line(exc),
                )
                return Outcome(
                    held=held, decision=outcomes.release(held.execution, self.clock.now())
                )
            context = replace(prepared.context, session=transaction.session)
            handler = task.handler if task.is_async else transaction.guard(task.handler)
            result, error = await _run_handler(self._calls, prepared, started_at, context, handler)
            attempted = self._attempted(context, result, error, started_at, started)
            if error is not None or held.stop_requested:  # rolled back with the attempt
                return attempted
            try:
                return await self._commit(transaction, self._succeeded(prepared, attempted))
            except Exception as exc:  # not recordable, or not committed: a failure
                return replace(attempted, error=exc)

    def _attempted(
        self,
        context: ExecutionContext[Any],
        result: Any,
        error: BaseException | None,
        started_at: datetime,
        started: float,
    ) -> Attempted:
        """What an attempt started at ``started_at`` (``started``, by ``time.monotonic``)
        came to, now that it has ended."""
        return Attempted(
            context=context,
            result=result,
            error=error,
            started_at=started_at,
            duration=timedelta(seconds=time.monotonic() - started),
            ended_at=self.clock.now(),
        )

    def decide(self, prepared: Prepared, attempted: Attempted) -> Outcome:
        """What ``attempted`` comes to, by the outcome policy (``outcomes``): a success, a
        snooze, or, when the handler failed or its success or snooze cannot be recorded, a
        retry or an abandon, logged and told to the listeners (``on_failure``)."""
        if prepared.held.stop_requested:  # whatever the handler did once asked to stop
            return _cancelled(prepared, attempted)
        error, now, started_at = attempted.error, attempted.ended_at, attempted.started_at
        if error is None or isinstance(error, Snooze):
            try:
                if error is None:
                    return self._succeeded(prepared, attempted)
                snoozed = outcomes.snoozed(prepared.policy, error, now=now, started_at=started_at)
                return Outcome(held=prepared.held, decision=snoozed)
            except Exception as exc:
                error = exc
        decision = outcomes.failed(prepared.policy, error, now=now, started_at=started_at)
        return self._failed(prepared, attempted, error, decision)

    def _succeeded(self, prepared: Prepared, attempted: Attempted) -> Outcome:
        """The success of ``attempted``: raises what the policy raises when it cannot be
        recorded (see ``outcomes.succeeded``)."""
        context = attempted.context
        completion = outcomes.succeeded(
            prepared.policy,
            attempted.result,
            now=attempted.ended_at,
            scheduled=context.scheduled,
            plans=context.plans,
            started_at=attempted.started_at,
        )
        on_recorded = (
            partial(dispatch, self.listeners, "on_success", context, attempted.duration)
            if self.listeners
            else None
        )
        return Outcome(held=prepared.held, decision=completion, on_recorded=on_recorded)

    def _failed(
        self,
        prepared: Prepared,
        attempted: Attempted,
        error: BaseException,
        decision: Completion | outcomes.Abandon,
    ) -> Outcome:
        """The retry or abandon ``decision`` that ``error``, the attempt's failure, came to,
        logged and told to the listeners."""
        held, task, context = prepared.held, prepared.task, attempted.context
        retry_at = None if isinstance(decision, outcomes.Abandon) else decision.at
        log.error(
            "execution %s failed (consecutive failures: %d)%s",
            held.label,
            decision.failures,
            "" if retry_at is None else f"; retrying at {retry_at.isoformat()}",
            exc_info=error,
        )
        dispatch(self.listeners, "on_failure", context, error, attempted.duration)
        return Outcome(held=held, decision=decision, context=context, on_abandon=task.on_abandon)

    async def _group(self, group_id: int) -> Group | None:
        """The group a callback waited for, with its members' outcomes and results."""
        read = partial(
            _store.groups.get, statements=self.statements, group_id=group_id, members=True
        )
        return await self.db.shielded(read)

    async def _decode(self, task: Task[Any], execution: Execution) -> Any:
        """``execution``'s payload. One written by an earlier version of the task is
        upcast in a handler thread: the upcasters are application code that may block or
        loop, and the event loop (heartbeats, other executions, a stop) must not wait on
        them; a stop leaves such a call running, as it does a handler."""
        decode = partial(task.codec.decode, execution.data)
        version = execution.payload_version
        if version is None or version == task.codec.version:
            return decode(version)
        return await self._threads.run(decode, version)

    def _late(self, held: Held) -> Outcome | None:
        """A release of ``held`` when it is a rate-limited task's execution past the time
        it had to start by (see ``_store.rates``): its start was counted, to come by then,
        when it was picked. Handed back untouched, it is picked again as its window allows;
        ``None`` when it may start."""
        now = self.clock.now()
        if held.start_by is None or now <= held.start_by:
            return None
        log.info(
            "%s did not start by %s, as its rate limit needs: handing it back",
            held.label,
            held.start_by.isoformat(),
        )
        return Outcome(
            held=held,
            decision=outcomes.release(held.execution, now),
            on_recorded=self._on_handed_back,
        )

    async def _commit(self, transaction: Transaction, success: Outcome) -> Outcome:
        """Record a transactional handler's ``success`` in its own transaction and commit
        the two together; when the execution was taken over, record nothing and roll back."""
        completion = success.decision
        assert isinstance(completion, Completion)  # what ``_succeeded`` decides
        complete = partial(
            _store.complete,
            statements=self.statements,
            batch=[completion],
            history=self.config.history,
            notify=self._limited,
        )
        if not await transaction.commit_if(lambda conn: complete(conn)[0]):
            log_lost(completion.execution, completion.kind)
            return Outcome(held=success.held, decision=None)
        return replace(success, committed=True)


async def _run_handler(
    calls: HandlerCalls,
    prepared: Prepared,
    started_at: datetime,
    context: ExecutionContext[Any],
    handler: Handler[Any],
) -> tuple[Any, BaseException | None]:
    """``handler`` through ``calls``, its held execution told that it runs: a stop
    requested meanwhile (or before) cancels it, if it is async (see ``stops``)."""
    held = prepared.held
    held.enter_handler(started_at)
    try:
        return await calls.run(prepared.task, context, handler)
    finally:
        held.leave_handler()


def _cancelled(prepared: Prepared, attempted: Attempted) -> Outcome:
    """The end of an attempt whose stop was requested while it ran: ``cancelled``."""
    held = prepared.held
    completion = outcomes.cancelled(
        held.execution,
        keep_result=prepared.policy.keep_result,
        now=attempted.ended_at,
        started_at=attempted.started_at,
        reason=f"cancelled: its handler stopped {stopped_by(attempted.error)}",
    )
    return Outcome(held=held, decision=completion, on_recorded=partial(log_cancelled, held))


def _context(
    task: Task[Any],
    held: Held,
    payload: Any,
    group: Group | None,
    shutdown: ShutdownSignal,
    progress: ProgressReports | None,
) -> ExecutionContext[Any]:
    """The context ``held``'s handler gets: it stops on ``shutdown`` and reports its
    progress to ``progress``."""
    execution = held.execution
    return ExecutionContext(
        payload=payload,
        task_name=execution.task_name,
        instance_id=execution.instance_id,
        execution_time=execution.execution_time,
        consecutive_failures=execution.consecutive_failures,
        last_error=execution.last_error,
        snoozes=execution.snoozes,
        priority=execution.priority,
        # an execution with a timeout has a signal of its own, also set at its timeout
        shutdown=shutdown if task.timeout is None else shutdown.child(),
        cancelled=held.cancelled,
        trace_context=execution.trace_context,
        group=group,
        _report=None if progress is None else progress.reporter(held),
    )


def _log_undecodable(execution: Execution, error: Exception) -> None:
    log.error(
        "took %s/%s out of the table (into history as undecodable, unless history is "
        "off): its %s (%s); raw payload: %r",
        execution.task_name,
        execution.instance_id,
        "schedule does not read"
        if isinstance(error, InvalidScheduleError)
        else "payload does not decode",
        error,
        execution.data,
    )


@dataclass(eq=False)
class _Starting:
    """A worker waiting for the start of its execution to be recorded."""

    held: Held
    done: anyio.Event = field(default_factory=anyio.Event)
    #: Set on the waiter that is to write the next batch.
    lead: bool = False
    #: The keys recorded as started in its batch; ``None`` when writing them failed.
    started: set[Key] | None = None


class _StartRecorder(Service):
    """Records that handlers start, many workers' starts in one statement.

    A revival counts a failure only for an execution whose start was recorded, so that
    executions merely waiting in a dead process's queue lose nothing. Recording costs a
    statement, so only executions that have been in trouble before (a failure or a
    revival set ``last_failure``) are recorded: a handler that kills its process is thus
    counted from its second crash on, and abandoned after ``max_retries`` counted crashes
    like any failing execution.
    """

    def __init__(self, parts: Parts, writes: RowWrites) -> None:
        super().__init__(parts)
        self.writes = writes
        self._waiting: list[_Starting] = []
        self._busy = False

    async def record(self, held: Held) -> Outcome | None:
        """Record ``held``'s start; ``None`` when it may run, else the outcome instead.

        Workers arriving while a record is being written wait and are written together in
        the next statement. An execution taken over by another scheduler is let go, not
        run; when the record cannot be written, the execution is handed back instead.
        """
        waiter = _Starting(held)
        self._waiting.append(waiter)
        if self._busy:
            await waiter.done.wait()
            if not waiter.lead:
                return self._verdict(waiter)
        self._busy = True
        batch, self._waiting = self._waiting, []
        try:
            started = await self._write([w.held for w in batch])
        finally:
            if self._waiting:  # the next batch gathered meanwhile: its first writes it
                self._waiting[0].lead = True
                self._waiting[0].done.set()
            else:
                self._busy = False
        for other in batch:
            other.started = started
            if other is not waiter:
                other.done.set()
        return self._verdict(waiter)

    def _verdict(self, waiter: _Starting) -> Outcome | None:
        held = waiter.held
        if waiter.started is None:  # not recorded: hand it back for a later pick
            return Outcome(held=held, decision=outcomes.release(held.execution, self.clock.now()))
        if held.key not in waiter.started:
            held.lose("start")
            return Outcome(held=held, decision=None)
        return None

    async def _write(self, batch: list[Held]) -> set[Key] | None:
        keys = versioned_keys(batch)
        try:
            async with self.writes.statement():
                return await self.db.shielded(
                    partial(
                        _store.mark_started,
                        statements=self.statements,
                        held=keys,
                        now=self.clock.now(),
                    ),
                    autocommit=True,
                    lane="starter",  # one record is written at a time: it keeps a connection
                )
        except Exception:
            log.warning(
                "could not record the start of %d execution(s); handing them back",
                len(keys),
                exc_info=True,
            )
            return None
