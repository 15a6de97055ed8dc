"""The outcome policy: what a handler's result or error comes to. Pure: no I/O, no clock.

An execution's ``Policy`` is read once before it runs (``policy_of``: its task, its
schedule, its retry limit, whether its outcome is kept). Each decision takes it and the
time, and returns what to record: a ``Completion`` (committed in a batch with others) or
an ``Abandon`` (the row removed together with the task's ``on_abandon`` hook).
``Outcome`` carries that decision from the executor to the completer with what the
completer needs to act on it.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache, partial
from typing import Any

from sqla_scheduler._app_code import calling
from sqla_scheduler._checks import check_aware
from sqla_scheduler._error_text import MAX_ERROR_TEXT, error_text
from sqla_scheduler._execution import KEEP, Execution, GroupPlan, NextAt, TaskInstance
from sqla_scheduler._result import encode_result, kept
from sqla_scheduler._runner.held import Held
from sqla_scheduler._store import Completion
from sqla_scheduler.config import SchedulerConfig, backoff, read_setting
from sqla_scheduler.context import ExecutionContext
from sqla_scheduler.exceptions import PayloadError, Snooze, TaskDefinitionError
from sqla_scheduler.models import INT_MAX
from sqla_scheduler.schedules import Disabled, Schedule
from sqla_scheduler.tasks import OneTimeTask, RecurringTask, Task, as_schedule

__all__ = [
    "Abandon",
    "Outcome",
    "Policy",
    "abandon_failed",
    "cancelled",
    "failed",
    "jitter_fraction",
    "keeps_result",
    "policy_of",
    "release",
    "retry_delay",
    "snooze_until",
    "snoozed",
    "spent",
    "succeeded",
    "undecodable",
    "verdict",
]

log = logging.getLogger("sqla_scheduler")


@dataclass(frozen=True, slots=True, kw_only=True)
class Abandon:
    """Remove the execution and run its task's ``on_abandon`` hook, in one commit."""

    execution: Execution
    #: The consecutive failures counted, this attempt's included.
    failures: int
    #: The error of the last attempt; ``None`` when it was spent before it ran.
    error: BaseException | None = None
    #: The text of the last failed attempt's error, followed by the rule that gave up on
    #: it (``failed``), for the ``on_abandon`` hook (``ctx.last_error``), the history
    #: entry, and the row should the abandon fail.
    last_error: str | None = None
    #: When the last attempt's handler started; ``None`` when it did not run.
    started_at: datetime | None = None
    #: Whether the task keeps results: the abandon is then one (see ``results``).
    keep_result: bool = False


@dataclass(eq=False, slots=True, kw_only=True)
class Outcome:
    """What one held execution came to, on its way from the executor to the completer."""

    held: Held
    #: What to record; ``None`` when nothing is (another scheduler took the execution over).
    decision: Completion | Abandon | None
    #: The handler's context, for the ``on_abandon`` hook and listeners.
    context: ExecutionContext[Any] | None = None
    #: The task's ``on_abandon`` hook, run in the abandon's transaction.
    on_abandon: Callable[[ExecutionContext[Any], Any], Any] | None = None
    #: Called once the decision is committed (listeners, logs).
    on_recorded: Callable[[], None] | None = None
    #: Whether the decision is committed already, with a transactional handler's writes.
    committed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Policy:
    """What decides an execution's outcome: its task and config, with what they come to for
    it, read once before it runs (``policy_of``) for every decision after."""

    task: Task[Any]
    #: The execution as picked.
    execution: Execution
    config: SchedulerConfig
    #: What runs a recurring task's execution next (``_schedule_of``); ``None`` for others.
    schedule: Schedule | None
    #: How many retries it gets; ``None`` for no limit (``_retry_limit``).
    retry_limit: int | None
    #: Whether its final outcome is kept (``keeps_result``).
    keep_result: bool


def policy_of(task: Task[Any], execution: Execution, config: SchedulerConfig) -> Policy:
    """``execution``'s policy. Raises ``InvalidScheduleError`` (naming the task) when it is
    a recurring task's whose schedule is its row's, and that is missing or does not read:
    such a row cannot run."""
    return Policy(
        task=task,
        execution=execution,
        config=config,
        schedule=_schedule_of(task, execution) if isinstance(task, RecurringTask) else None,
        retry_limit=_retry_limit(task, config),
        keep_result=keeps_result(task, execution),
    )


def _schedule_of(task: RecurringTask[Any], execution: Execution) -> Schedule:
    """What runs ``execution`` of a recurring task next: the task's schedule, or, for a task
    without one, the schedule its row carries."""
    if task.schedule is not None:
        return task.schedule
    return _own_schedule(task.name, execution.schedule)


def _next_run(policy: Policy, schedule: Schedule, now: datetime) -> datetime:
    """When ``schedule`` (maybe the application's own class) runs the execution next after
    a run that ended at ``now``; what it raises is an ``Exception`` (see ``_app_code``)."""
    with calling(policy.task.name, f"schedule {type(schedule).__name__}.next_run"):
        return schedule.next_run(scheduled_at=policy.execution.execution_time, completed_at=now)


@lru_cache(maxsize=1024)
def _own_schedule(task_name: str, text: str | None) -> Schedule:
    # Every run of an instance reads its row's text: read each text once.
    return as_schedule(task_name, text, own=True)


def one_more_failure(failures: int) -> int:
    """The failure count after one more failure: counted from 0 when the row held a
    negative count, and staying at the column's largest value once there."""
    return min(max(failures, 0) + 1, INT_MAX)


def _retry_limit(task: Task[Any], config: SchedulerConfig) -> int | None:
    """How many retries ``task``'s executions get; ``None`` for no limit.

    A recurring task is never abandoned: its schedule goes on.
    """
    if isinstance(task, RecurringTask):
        return None
    return task.max_retries if task.max_retries is not None else config.max_retries


def keeps_result(task: Task[Any], execution: Execution) -> bool:
    """Whether the final outcome of ``execution`` of ``task`` is kept: its task keeps
    results (``keep_result``), or it is a member of a group, whose callback sees it."""
    if execution.group_id is not None:
        return True
    return isinstance(task, OneTimeTask) and task.keep_result


def spent(policy: Policy) -> Abandon | None:
    """An ``Abandon`` when the execution is out of retries before it runs again.

    That happens after a failed abandon, or after revivals counted crashes.
    """
    execution, limit = policy.execution, policy.retry_limit
    if limit is not None and execution.consecutive_failures > limit:
        return Abandon(
            execution=execution,
            failures=execution.consecutive_failures,
            last_error=execution.last_error,
            keep_result=policy.keep_result,
        )
    return None


def succeeded(
    policy: Policy,
    result: Any,
    *,
    now: datetime,
    scheduled: Sequence[TaskInstance[Any]] = (),
    plans: Sequence[GroupPlan] = (),
    started_at: datetime | None = None,
) -> Completion:
    """What a handler started at ``started_at`` that returned ``result`` at ``now`` comes to.

    Raises ``TypeError`` when the result is not one the task's kind can return, and
    ``PayloadError`` when a task with ``keep_result`` returns one it cannot keep (not
    JSON, or more than the config's ``max_result_size`` bytes of it); the caller records
    either as a failure.
    """
    task, execution, schedule = policy.task, policy.execution, policy.schedule
    finish = partial(
        Completion,
        execution=execution,
        now=now,
        scheduled=scheduled,
        plans=plans,
        outcome="succeeded",
        started_at=started_at,
    )
    if schedule is not None:  # a recurring task's
        if isinstance(schedule, Disabled):
            return finish(kind="remove")
        at = _next_run(policy, schedule, now)
        if result is None:  # the payload stays, and the version it was written with
            return finish(kind="succeed", at=at, data=execution.data)
        data = task.codec.encode(result)
        return finish(kind="succeed", at=at, data=data, payload_version=task.payload_version)
    if isinstance(result, NextAt):
        if task.kind != "custom":
            raise TypeError(
                f"one-time task {task.name!r} returned NextAt; only custom tasks reschedule "
                "themselves (define it with @custom)"
            )
        if result.payload is KEEP:
            return finish(kind="succeed", at=result.at, data=execution.data)
        data = task.codec.encode(result.payload)
        return finish(kind="succeed", at=result.at, data=data, payload_version=task.payload_version)
    if task.kind == "custom" and result is not None and not policy.keep_result:
        raise TypeError(
            f"custom task {task.name!r} returned {result!r}; return NextAt(at, payload) "
            "to run again or None to finish (or define it with keep_result=True to "
            "finish with that result)"
        )
    return _finished(finish, policy, result, now)


def _finished(
    finish: Callable[..., Completion], policy: Policy, result: Any, now: datetime
) -> Completion:
    """The row is removed: the execution finished, with ``result`` kept if its outcome is."""
    if not policy.keep_result:
        return finish(kind="remove")
    task = policy.task
    try:
        value = encode_result(task.name, result, policy.config.max_result_size)
    except PayloadError:
        if isinstance(task, OneTimeTask) and task.keep_result:
            raise
        value = None  # a group's member whose task keeps no result: its outcome is what counts
    return finish(kind="remove", result=kept(policy.execution, "succeeded", now, value=value))


def failed(
    policy: Policy,
    error: BaseException,
    *,
    now: datetime,
    started_at: datetime | None = None,
) -> Completion | Abandon:
    """What a handler started at ``started_at`` that raised ``error`` at ``now`` comes to:
    a retry, or an abandon.

    The task's retry rules decide first (``verdict``); a retry waits the delay
    ``should_retry`` gave, else the task's backoff (``retry_delay``). A recurring task is
    never abandoned: its retry waits no longer than its next regular run, and a run its
    rules give up on waits for that run (when its schedule, maybe the application's own,
    can tell it: else the retry delay alone, so a schedule that raises is a failure of the
    run, backed off). A recurring task whose schedule is disabled has nothing to retry
    into and is abandoned (removed). Either carries the error's text (``_error_text``),
    an abandon's or a given-up run's followed by the rule that decided.
    """
    task, execution, schedule = policy.task, policy.execution, policy.schedule
    failures = one_more_failure(execution.consecutive_failures)
    gave_up, delay = verdict(task, error, failures)
    retry_at = now + (
        retry_delay(task, execution, failures, policy.config) if delay is None else delay
    )
    text = error_text(error)
    if schedule is not None:  # a recurring task's
        if isinstance(schedule, Disabled):
            return _abandon(policy, error, failures, text, started_at)
        try:
            next_at = _next_run(policy, schedule, now)
        except Exception as schedule_error:  # the application's schedule: the backoff
            log.error(
                "task %r: its schedule cannot tell the next run after %s; retrying at %s",
                task.name,
                execution.execution_time.isoformat(),
                retry_at.isoformat(),
                exc_info=schedule_error,
            )
        else:
            retry_at = next_at if gave_up is not None else min(retry_at, next_at)
    elif gave_up is None and (limit := policy.retry_limit) is not None and failures > limit:
        gave_up = f"retry limit {limit}"
    if gave_up is not None:
        text = _decided(text, gave_up)
        if schedule is None:
            return _abandon(policy, error, failures, text, started_at)
    return Completion(
        execution=execution,
        kind="fail",
        now=now,
        at=retry_at,
        failures=failures,
        error=text,
        outcome="failed",
        started_at=started_at,
    )


def snoozed(
    policy: Policy,
    snooze: Snooze,
    *,
    now: datetime,
    started_at: datetime | None = None,
) -> Completion:
    """What a handler started at ``started_at`` that raised ``snooze`` at ``now`` comes
    to: the execution runs again at the time the snooze names, with its payload, one more
    snooze counted and its failures untouched (a recurring task's run moves; its schedule
    does not).

    Raises ``TaskDefinitionError`` (a ``ValueError``) naming the task when the snooze's
    delay is not one (``snooze_until``); the caller records that as a failure.
    """
    execution = policy.execution
    return Completion(
        execution=execution,
        kind="snooze",
        now=now,
        at=snooze_until(policy.task.name, snooze.delay, now),
        snoozes=min(max(execution.snoozes, 0) + 1, INT_MAX),
        outcome="snoozed",
        started_at=started_at,
    )


def snooze_until(task_name: str, delay: object, now: datetime) -> datetime:
    """When a snooze of ``delay`` (a ``timedelta``, seconds, or an aware ``datetime``)
    raised at ``now`` by ``task_name``'s handler runs the execution again; raises
    ``TaskDefinitionError`` naming the task and the problem for a naive datetime, a
    negative delay, a time outside the range the table holds, or anything else."""
    what = f"task {task_name!r}: Snooze({delay!r})"
    if isinstance(delay, datetime):
        if delay.tzinfo is None or delay.utcoffset() is None:
            raise TaskDefinitionError(
                f"{what}: a naive datetime; give an aware one (e.g. with tzinfo=timezone.utc)"
            )
        at = delay
    else:
        try:
            at = now + _snooze_delay(what, delay)
        except OverflowError:
            raise TaskDefinitionError(f"{what}: a delay past the year 9999") from None
    check_aware(at, f"{what}: the time to run again")
    return at


def _snooze_delay(what: str, delay: object) -> timedelta:
    """``delay`` as a ``timedelta`` of 0 or more; raises ``TaskDefinitionError`` beginning
    with ``what`` for anything else, ``OverflowError`` for more than a ``timedelta`` holds."""
    if isinstance(delay, bool) or not isinstance(delay, (timedelta, int, float)):
        raise TaskDefinitionError(
            f"{what}: not a delay; give a timedelta, a number of seconds or an aware datetime"
        )
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else float(delay)
    if not math.isfinite(seconds):
        raise TaskDefinitionError(f"{what}: not a delay; give a finite number of seconds")
    if seconds < 0:
        raise TaskDefinitionError(f"{what}: a negative delay; give one of 0 or more")
    return delay if isinstance(delay, timedelta) else timedelta(seconds=seconds)


def verdict(
    task: Task[Any], error: BaseException, attempt: int
) -> tuple[str | None, timedelta | None]:
    """What ``task``'s retry rules say of ``error``, its ``attempt``-th failure in a row:
    the rule that gives up (``None``: none does) and the delay ``should_retry`` chose
    (``None``: the backoff's).

    The first rule that gives up decides: ``give_up_on``, then ``retry_on``, then
    ``should_retry``. ``should_retry`` is the application's code: what it raises, or an
    answer that is neither a bool nor a delay from zero to the longest retry delay, is
    logged and leaves the decision to the default rule (the backoff and ``max_retries``).
    """
    given_up = next((t for t in task.give_up_on if isinstance(error, t)), None)
    if given_up is not None:
        return f"given up: give_up_on {given_up.__qualname__}", None
    if task.retry_on is not None and not isinstance(error, task.retry_on):
        return "not in retry_on", None
    if task.should_retry is None:
        return None, None
    try:
        with calling(task.name, "should_retry"):
            answer = task.should_retry(error, attempt)
        return _answer(answer)
    except Exception as rule_error:
        log.error(
            "task %r: should_retry failed on attempt %d; the default rule decides",
            task.name,
            attempt,
            exc_info=rule_error,
        )
        return None, None


def _answer(answer: object) -> tuple[str | None, timedelta | None]:
    """What ``should_retry``'s ``answer`` says, as ``verdict`` returns it; ``TypeError``
    or ``ValueError`` for an answer that says nothing."""
    if isinstance(answer, bool):
        return (None if answer else "should_retry said no"), None
    if not isinstance(answer, timedelta):
        raise TypeError(f"should_retry returned {answer!r}; return True, False or a timedelta")
    try:
        return None, read_setting("retry_max_delay", answer)
    except ValueError as exc:
        raise ValueError(f"should_retry returned {answer!r}, a delay that {exc}") from None


def retry_delay(
    task: Task[Any], execution: Execution, failures: int, config: SchedulerConfig
) -> timedelta:
    """The backoff before the retry after ``failures`` failures in a row of ``execution``:
    the task's backoff settings, else the config's, shortened by up to ``retry_jitter`` of
    itself by a fraction that the task, the instance and the attempt fix (the same in
    every process). Where the task's settings and the config's disagree, the task's win:
    its base delay above the config's cap raises the cap to it."""
    base, rate, cap = task.retry_base_delay, task.retry_backoff_rate, task.retry_max_delay
    if base is None:
        base = config.retry_base_delay
    if rate is None:
        rate = config.retry_backoff_rate
    if cap is None:
        cap = max(base, config.retry_max_delay)
    delay = backoff(failures, base, rate, cap)
    if not task.retry_jitter:
        return delay
    return delay * (1 - task.retry_jitter * jitter_fraction(execution, failures))


def jitter_fraction(execution: Execution, attempt: int) -> float:
    """A fraction in [0, 1) that only the execution and the attempt decide."""
    key = f"{execution.task_name}\0{execution.instance_id}\0{attempt}".encode()
    digest = hashlib.blake2b(key, digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def _decided(text: str, rule: str) -> str:
    """The error's text followed by the rule that gave up on it, on a line of its own,
    within the room a row's error text has."""
    line = f"\n({rule})"
    return text[: MAX_ERROR_TEXT - len(line)] + line


def _abandon(
    policy: Policy,
    error: BaseException,
    failures: int,
    text: str,
    started_at: datetime | None,
) -> Abandon:
    return Abandon(
        execution=policy.execution,
        failures=failures,
        error=error,
        last_error=text,
        started_at=started_at,
        keep_result=policy.keep_result,
    )


def abandon_failed(abandon: Abandon, *, now: datetime, config: SchedulerConfig) -> Completion:
    """The row is kept when its abandon could not commit; abandoning it is retried later.

    Each failed attempt counts as a failure, so the retries back off further. The row
    keeps the handler's last error (the hook's is logged), so the retried hook sees it.
    """
    failures = one_more_failure(abandon.failures)
    return Completion(
        execution=abandon.execution,
        kind="fail",
        now=now,
        at=now + config.retry_delay(failures),
        failures=failures,
        error=abandon.last_error,
    )


def undecodable(
    task: Task[Any], execution: Execution, error: BaseException, now: datetime
) -> Completion:
    """A payload that does not decode (or an instance's own schedule that does not read)
    can never run: the row is taken out of rotation, into history with its payload and
    the ``error`` (and into the results, when its outcome is kept: ``keeps_result``)."""
    text = error_text(error)
    keep = keeps_result(task, execution)
    return Completion(
        execution=execution,
        kind="undecodable",
        now=now,
        error=text,
        outcome="undecodable",
        result=kept(execution, "undecodable", now, error=text) if keep else None,
    )


def cancelled(
    execution: Execution,
    *,
    keep_result: bool,
    now: datetime,
    started_at: datetime | None = None,
    reason: str,
) -> Completion:
    """What an execution ``cancel`` stopped comes to, whatever its handler did after the
    request: the row leaves the table (a recurring or custom task's instance too), its
    history entry is ``cancelled`` with ``reason`` as its error, one whose outcome is kept
    (``keep_result``: its task keeps results, or it is a group's member) keeps
    ``cancelled``, and its group counts it as finished. No failure is counted and no
    ``on_abandon`` runs."""
    return Completion(
        execution=execution,
        kind="remove",
        now=now,
        error=reason,
        outcome="cancelled",
        started_at=started_at,
        result=kept(execution, "cancelled", now, error=reason) if keep_result else None,
    )


def release(execution: Execution, now: datetime) -> Completion:
    """Hand the execution back untouched, for any scheduler to pick again."""
    return Completion(execution=execution, kind="release", now=now)
