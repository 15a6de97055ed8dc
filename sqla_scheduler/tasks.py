"""Task definitions: recurring, one-time and custom.

A task is a named handler plus the policy the scheduler applies to its executions. The
decorators [`recurring`][], [`one_time`][] and [`custom`][] turn a sync or async function of
one argument (the [`ExecutionContext`][]) into a task definition. Every argument is checked
here, where the task is defined, so a mistake fails at import time with the task, the field
and the value in the message.
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypedDict, TypeVar, overload

from sqla_scheduler._app_code import calling
from sqla_scheduler._checks import (
    MAX_RETRIES,
    MAX_TASK_CONCURRENCY,
    check_payload_version,
    check_priority,
    check_task_name,
    is_int,
)
from sqla_scheduler._execution import KEEP, RECURRING_INSTANCE_ID, NextAt, TaskInstance
from sqla_scheduler._payload import PayloadCodec, Upcaster, codec_for
from sqla_scheduler.config import read_setting
from sqla_scheduler.exceptions import InvalidScheduleError, TaskDefinitionError
from sqla_scheduler.schedules import Disabled, Schedule, parse_schedule

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from sqla_scheduler.context import ExecutionContext

__all__ = [
    "KEEP",
    "RECURRING_INSTANCE_ID",
    "CustomTask",
    "NextAt",
    "OneTimeTask",
    "RateLimit",
    "RecurringTask",
    "Task",
    "TaskInstance",
    "TaskKind",
    "Upcaster",
    "custom",
    "one_time",
    "recurring",
]

P = TypeVar("P")
TaskKind = Literal["recurring", "one_time", "custom"]


Handler = Callable[["ExecutionContext[P]"], Any]
AbandonHook = Callable[["ExecutionContext[Any]", Any], Any]
ShouldRetry = Callable[[BaseException, int], "bool | timedelta"]
"""``should_retry(error, attempt)``: ``False`` gives up, ``True`` retries after the
backoff, a ``timedelta`` retries after that delay (see ``docs/retry-policy.md``)."""
ErrorTypes = type[BaseException] | tuple[type[BaseException], ...]
"""An exception class, or a tuple of them (as ``isinstance`` takes them)."""

#: The most starts a rate limit allows in its window.
_MAX_RATE_COUNT = 1_000_000
#: The shortest window of a rate limit: below it, the time between a pick and the start of
#: its handler would be a sizeable part of the window (see ``_store.rates``).
_MIN_RATE_PER = timedelta(seconds=1)
#: The longest window of a rate limit.
_MAX_RATE_PER = timedelta(days=7)
#: The seconds in each unit of a rate limit's text.
_RATE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE_TEXT = re.compile(r"(?P<count>[0-9]+)/(?P<every>[0-9]*)(?P<unit>[smhd])")


@dataclass(frozen=True, slots=True)
class RateLimit:
    """At most ``count`` executions of a task start in any window of ``per``, across every
    process sharing the table: ``RateLimit(100, per=timedelta(minutes=1))``, or as text
    ``"100/m"`` (see [`parse`][sqla_scheduler.tasks.RateLimit.parse]).

    ``count`` is an int from 1 to 1,000,000; ``per`` a ``timedelta`` from 1 second to 7
    days. Anything else raises [`TaskDefinitionError`][].
    """

    count: int
    per: timedelta

    def __post_init__(self) -> None:
        if not is_int(self.count) or not 1 <= self.count <= _MAX_RATE_COUNT:
            raise TaskDefinitionError(
                f"a rate limit's count must be an int from 1 to {_MAX_RATE_COUNT:,}, "
                f"got {self.count!r}"
            )
        if not isinstance(self.per, timedelta) or not _MIN_RATE_PER <= self.per <= _MAX_RATE_PER:
            raise TaskDefinitionError(
                f"a rate limit's per must be a timedelta from 1 second to 7 days, got {self.per!r}"
            )

    @classmethod
    def parse(cls, text: str) -> RateLimit:
        """``"COUNT/UNIT"``, UNIT one of ``s``, ``m``, ``h``, ``d``, optionally with a
        number before it: ``"5/s"``, ``"100/m"``, ``"1000/h"``, ``"100/5m"`` (100 in any
        five minutes)."""
        found = _RATE_TEXT.fullmatch(text.strip()) if isinstance(text, str) else None
        if found is None:
            raise TaskDefinitionError(
                f"a rate limit is written COUNT/UNIT, UNIT one of s, m, h, d, optionally "
                f"with a number before it (5/s, 100/m, 100/5m), got {text!r}"
            )
        seconds = int(found["every"] or 1) * _RATE_UNITS[found["unit"]]
        if not _MIN_RATE_PER.total_seconds() <= seconds <= _MAX_RATE_PER.total_seconds():
            raise TaskDefinitionError(
                f"a rate limit's window must be from 1 second to 7 days, got {text!r}"
            )
        try:
            return cls(int(found["count"]), per=timedelta(seconds=seconds))
        except TaskDefinitionError as exc:
            raise TaskDefinitionError(f"{exc} (in {text!r})") from None


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Task(Generic[P]):
    """What every kind of task has: a name, a handler and a retry policy."""

    kind: ClassVar[TaskKind]

    name: str
    handler: Handler[P]
    payload_type: type[P] | None = None
    priority: int = 0
    max_retries: int | None = None
    on_abandon: AbandonHook | None = None
    timeout: timedelta | None = None
    """How long one attempt may run (seconds may be given as a number); ``None``: no limit."""
    max_concurrency: int | None = None
    """At most this many executions of the task run at once across every process sharing
    the table (picked ones count, running or waiting); ``None``: no limit."""
    rate_limit: RateLimit | None = None
    """At most this many executions of the task start in any window of its length across
    every process sharing the table (text such as ``"100/m"`` is parsed); ``None``: no
    limit."""
    transactional: bool = False
    """Whether the handler gets ``ctx.session``, in the transaction that records its
    outcome: its writes commit if and only if its success is recorded."""
    payload_version: int = 1
    """The version of the payloads this task writes; each row records the version its
    payload was written with."""
    retry_on: tuple[type[BaseException], ...] | None = None
    """Only errors of these types are retried; any other gives up at once. ``None``:
    every error is retried (a class alone is read as a tuple of one)."""
    give_up_on: tuple[type[BaseException], ...] = ()
    """Errors of these types give up at once, whatever the other rules say."""
    should_retry: ShouldRetry | None = None
    """``fn(error, attempt)``, called after each failure the types let through (``attempt``
    1 for the first failure in a row): ``False`` gives up, ``True`` retries after the
    backoff, a ``timedelta`` retries after that delay. What it raises or a value of
    another kind is logged, and the default rule decides."""
    retry_base_delay: timedelta | None = None
    """The task's own ``retry_base_delay``; ``None``: the config's."""
    retry_backoff_rate: float | None = None
    """The task's own ``retry_backoff_rate``; ``None``: the config's."""
    retry_max_delay: timedelta | None = None
    """The task's own ``retry_max_delay``; ``None``: the config's."""
    retry_jitter: float = 0.0
    """A fraction from 0 to 1: each backoff delay is shortened by up to this much of
    itself, by an amount fixed by the execution and its attempt, so that many executions
    failing at once do not retry at once."""
    upcasters: Mapping[int, Upcaster] = field(default_factory=dict)
    """``{k: fn}``: ``fn`` turns a version-k payload's JSON into version k+1's; one for
    each version from 1 to ``payload_version - 1``."""
    codec: PayloadCodec[P] = field(init=False, repr=False)
    is_async: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        check_task_name(self.name)
        _check_callable(self.name, "handler", self.handler, arity=1)
        if self.on_abandon is not None:
            _check_callable(self.name, "on_abandon", self.on_abandon, arity=2)
        check_priority(self.name, "priority", self.priority)
        if self.max_retries is not None and (
            not is_int(self.max_retries) or not 0 <= self.max_retries <= MAX_RETRIES
        ):
            raise TaskDefinitionError(
                f"task {self.name!r}: max_retries must be an int from 0 to {MAX_RETRIES} "
                f"or None, got {self.max_retries!r}"
            )
        object.__setattr__(self, "timeout", _check_timeout(self.name, self.timeout))
        if self.max_concurrency is not None and (
            not is_int(self.max_concurrency)
            or not 1 <= self.max_concurrency <= MAX_TASK_CONCURRENCY
        ):
            raise TaskDefinitionError(
                f"task {self.name!r}: max_concurrency must be an int from 1 to "
                f"{MAX_TASK_CONCURRENCY} or None, got {self.max_concurrency!r}"
            )
        object.__setattr__(self, "rate_limit", _check_rate_limit(self.name, self.rate_limit))
        if not isinstance(self.transactional, bool):
            raise TaskDefinitionError(
                f"task {self.name!r}: transactional must be True or False, "
                f"got {self.transactional!r}"
            )
        object.__setattr__(self, "upcasters", _check_upcasters(self))
        _check_retry_policy(self)
        codec = codec_for(self.name, self.payload_type, self.payload_version, self.upcasters)
        object.__setattr__(self, "codec", codec)
        object.__setattr__(self, "is_async", _is_async(self.handler))

    def __call__(self, context: ExecutionContext[P]) -> Any:
        """Call the handler directly (what a unit test of the task's logic does)."""
        return self.handler(context)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class OneTimeTask(Task[P]):
    """A task whose instances run once each; the row is removed after success."""

    kind: ClassVar[TaskKind] = "one_time"

    keep_result: bool = False
    """Whether each execution's final outcome is kept, with what its handler returned, for
    ``Scheduler.result`` and ``Scheduler.wait`` (for ``result_retention``)."""

    def __post_init__(self) -> None:
        Task.__post_init__(self)
        if not isinstance(self.keep_result, bool):
            raise TaskDefinitionError(
                f"task {self.name!r}: keep_result must be True or False, got {self.keep_result!r}"
            )

    def instance(
        self,
        instance_id: str,
        payload: P | None = None,
        at: datetime | None = None,
        priority: int | None = None,
    ) -> TaskInstance[P]:
        """Describe one execution of this task, to pass to ``Scheduler.schedule``.

        ``at`` must be timezone-aware (``None``: due now); ``priority`` defaults to the
        task's. The payload is encoded now, so an unserializable one fails here.
        """
        # TaskInstance checks every field and stores the payload as the database returns it
        return TaskInstance(
            task_name=self.name,
            instance_id=instance_id,
            data=self.codec.dump(payload),  # type: ignore[arg-type]
            execution_time=at,
            priority=self.priority if priority is None else priority,
            payload_version=self.payload_version,
        )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class CustomTask(OneTimeTask[P]):
    """A task that decides its own next run: its handler returns [`NextAt`][] or ``None``."""

    kind: ClassVar[TaskKind] = "custom"


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class RecurringTask(Task[P]):
    """A task the scheduler keeps rescheduling after each run.

    With a ``schedule`` it is one row, run by that schedule. Without one it is a task of
    many instances, each carrying a schedule of its own in its row (``instance``).
    """

    kind: ClassVar[TaskKind] = "recurring"

    schedule: Schedule | None = None
    """The one row's schedule; ``None``: each instance has its own (see ``instance``)."""
    initial_payload: P | None = None
    initial_data: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.schedule is not None:
            object.__setattr__(self, "schedule", as_schedule(self.name, self.schedule))
        Task.__post_init__(self)
        if self.schedule is None and self.initial_payload is not None:
            raise TaskDefinitionError(
                f"task {self.name!r}: initial_payload is for a task with a schedule (one row); "
                "give each instance its payload in task.instance(...)"
            )
        object.__setattr__(self, "initial_data", self.codec.encode(self.initial_payload))  # type: ignore[arg-type]

    def first_instance(self, now: datetime) -> TaskInstance[P] | None:
        """The row this task starts with; ``None`` when its schedule is disabled or it has
        none (its instances are scheduled by the application)."""
        if self.schedule is None:
            return None
        # the schedule may be the application's own class (see ``_app_code``)
        with calling(self.name, f"schedule {type(self.schedule).__name__}"):
            first = self.schedule.first_run(now)
            text = self.schedule.text
        if first is None:
            return None
        return TaskInstance(
            task_name=self.name,
            instance_id=RECURRING_INSTANCE_ID,
            data=self.initial_data,
            execution_time=first,
            priority=self.priority,
            schedule=text,
            payload_version=self.payload_version,
        )

    def instance(
        self,
        instance_id: str,
        payload: P | None = None,
        *,
        schedule: Schedule | str,
        priority: int | None = None,
    ) -> TaskInstance[P]:
        """Describe one instance with a schedule of its own, to pass to ``Scheduler.schedule``.

        Only for a task defined without a schedule. The instance first runs when
        ``schedule`` first says (computed by the scheduler's clock when it is scheduled),
        then after each run when its row's schedule says next; ``reschedule(...,
        schedule=...)`` changes it and ``cancel`` ends it.
        """
        if self.schedule is not None:
            raise TaskDefinitionError(
                f"task {self.name!r} has a schedule of its own and one row; define it as "
                f"recurring({self.name!r}) without a schedule to give each instance its own"
            )
        own = as_schedule(self.name, schedule, own=True)
        return TaskInstance(
            task_name=self.name,
            instance_id=instance_id,
            data=self.codec.dump(payload),  # type: ignore[arg-type]
            execution_time=None,  # the schedule's first run, by the scheduler's clock
            priority=self.priority if priority is None else priority,
            schedule=own.text,
            payload_version=self.payload_version,
        )


def as_schedule(task_name: str, value: object, *, own: bool = False) -> Schedule:
    """``value`` (a ``Schedule`` or its text form) as a ``Schedule``, or an
    ``InvalidScheduleError`` naming the task and the field. An instance's ``own``
    schedule cannot be disabled: an instance that should not run is cancelled."""
    schedule = value
    if isinstance(value, str):
        try:
            schedule = parse_schedule(value)
        except InvalidScheduleError as exc:
            raise InvalidScheduleError(f"task {task_name!r}: schedule: {exc}") from exc
    if not isinstance(schedule, Schedule):
        raise InvalidScheduleError(
            f"task {task_name!r}: schedule must be a Schedule or its text form, got {value!r}"
        )
    if own and isinstance(schedule, Disabled):
        raise InvalidScheduleError(
            f"task {task_name!r}: schedule: an instance's schedule cannot be disabled "
            f"({value!r}); cancel the instance instead"
        )
    return schedule


# --- decorators -----------------------------------------------------------------------


class _TaskOptions(TypedDict, total=False):
    """The keyword options every decorator takes, each the [`Task`][] field of its name
    (``upcasters=None``: none); one left out takes that field's default."""

    priority: int
    timeout: timedelta | float | None
    max_concurrency: int | None
    rate_limit: RateLimit | str | None
    transactional: bool
    payload_version: int
    upcasters: Mapping[int, Upcaster] | None
    retry_on: ErrorTypes | None
    give_up_on: ErrorTypes
    should_retry: ShouldRetry | None
    retry_base_delay: timedelta | float | None
    retry_backoff_rate: float | None
    retry_max_delay: timedelta | float | None
    retry_jitter: float


class _AbandonOptions(TypedDict, total=False):
    """The options of a task whose executions are abandoned when their retries are spent."""

    max_retries: int | None
    on_abandon: AbandonHook | None


class _OneTimeOptions(_AbandonOptions, _TaskOptions, total=False):
    """The options of ``one_time`` and ``custom``, in the order they document them."""

    keep_result: bool


@overload
def recurring(
    name: str,
    schedule: Schedule | str | None = None,
    *,
    payload_type: type[P],
    initial_payload: P | None = None,
    **options: Unpack[_TaskOptions],
) -> Callable[[Handler[P]], RecurringTask[P]]: ...
@overload
def recurring(
    name: str,
    schedule: Schedule | str | None = None,
    *,
    payload_type: None = None,
    initial_payload: Any = None,
    **options: Unpack[_TaskOptions],
) -> Callable[[Handler[Any]], RecurringTask[Any]]: ...
def recurring(
    name: str,
    schedule: Schedule | str | None = None,
    *,
    payload_type: type[Any] | None = None,
    initial_payload: Any = None,
    **options: Unpack[_TaskOptions],
) -> Callable[[Handler[Any]], RecurringTask[Any]]:
    """Define a recurring task: one row, run by ``schedule``, forever; or, without a
    schedule, a task of many instances, each with a schedule of its own
    (``task.instance(id, payload, schedule=...)``), none created at start-up.

    The handler's return value becomes the next run's payload unless it is ``None``.
    ``timeout``, ``max_concurrency``, ``rate_limit``, ``transactional``,
    ``payload_version``, ``upcasters`` and the retry options are those of ``one_time``.
    A recurring task is never abandoned: a failure retries at the earlier of the backoff
    and the next regular run, and a failure its retry options give up on waits for the
    next regular run, counted as a failure.
    """

    return _decorator(
        RecurringTask,
        options,
        _TaskOptions.__optional_keys__,
        name=name,
        schedule=schedule,  # text is parsed in __post_init__
        payload_type=payload_type,
        initial_payload=initial_payload,
    )


@overload
def one_time(
    name: str, *, payload_type: type[P], **options: Unpack[_OneTimeOptions]
) -> Callable[[Handler[P]], OneTimeTask[P]]: ...
@overload
def one_time(
    name: str, *, payload_type: None = None, **options: Unpack[_OneTimeOptions]
) -> Callable[[Handler[Any]], OneTimeTask[Any]]: ...
def one_time(
    name: str, *, payload_type: type[Any] | None = None, **options: Unpack[_OneTimeOptions]
) -> Callable[[Handler[Any]], OneTimeTask[Any]]:
    """Define a one-time task: each scheduled instance runs once and its row is removed.

    ``max_retries=N`` allows N retries after the first attempt (N at most 1,000,000); when
    they are spent the row is removed and ``on_abandon(context, session)`` runs in the same
    transaction.

    ``timeout`` (a ``timedelta`` or seconds) limits each attempt. An async handler is
    cancelled at its timeout; a sync handler cannot be stopped, so its context's
    ``shutdown`` signal is set and the attempt counts as failed when it returns. Either
    way the error says it timed out, and the retry policy applies.

    ``max_concurrency=N`` lets at most N executions of the task run at once across every
    process sharing the table (N from 1 to 1,000,000); the database enforces it.

    ``rate_limit="100/m"`` (or a [`RateLimit`][]) lets at most
    that many executions of the task start in any window of that length across every
    process sharing the table; the database enforces it. Executions over the limit wait
    for the window, in priority order, without failing.

    ``transactional=True`` gives the handler ``ctx.session``, joined to the transaction
    that records its outcome: its writes commit if and only if its success is recorded, so
    its effects in the scheduler's database happen exactly once. A sync handler needs a
    sync ``Engine``, an async one an ``AsyncEngine``.
    ``payload_version=N`` is the version of the payloads the task writes, recorded in each
    row; ``upcasters={1: fn1, ..., N-1: fn}`` bring the JSON of a payload written at an
    earlier version up to N, one version at a time, before ``payload_type`` decodes it. A
    payload that cannot be brought up (an unknown version, an upcaster that raises) leaves
    the table for history as ``undecodable``, where ``requeue`` can bring it back.

    ``keep_result=True`` keeps each execution's final outcome with what its handler
    returned (JSON, at most ``max_result_size``; a larger or unencodable result fails
    the attempt) for ``result_retention``, for ``Scheduler.result`` and ``Scheduler.wait``.

    The retry options decide what a failure comes to, in this order, the first rule that
    gives up deciding: ``give_up_on=(Exc, ...)`` gives up on errors of these types;
    ``retry_on=(Exc, ...)`` gives up on errors of any other type; ``should_retry(error,
    attempt)`` gives up when it returns ``False`` and sets the delay when it returns a
    ``timedelta``; then ``max_retries``. Giving up abandons the execution, and its history
    entry's error ends with the rule that decided, e.g. ``(given up: give_up_on
    ValueError)``. ``retry_base_delay``, ``retry_backoff_rate`` and ``retry_max_delay``
    override the config's for this task; ``retry_jitter=0.1`` shortens each backoff delay
    by up to a tenth, by an amount fixed by the execution and its attempt.
    """

    return _decorator(
        OneTimeTask,
        options,
        _OneTimeOptions.__optional_keys__,
        name=name,
        payload_type=payload_type,
    )


@overload
def custom(
    name: str, *, payload_type: type[P], **options: Unpack[_OneTimeOptions]
) -> Callable[[Handler[P]], CustomTask[P]]: ...
@overload
def custom(
    name: str, *, payload_type: None = None, **options: Unpack[_OneTimeOptions]
) -> Callable[[Handler[Any]], CustomTask[Any]]: ...
def custom(
    name: str, *, payload_type: type[Any] | None = None, **options: Unpack[_OneTimeOptions]
) -> Callable[[Handler[Any]], CustomTask[Any]]:
    """Define a custom task: its handler returns [`NextAt`][] to run again, ``None`` to end.

    ``max_retries``, ``on_abandon``, ``timeout``, ``max_concurrency``, ``rate_limit``,
    ``transactional``, ``payload_version``, ``upcasters``, ``keep_result`` and the retry
    options are those of ``one_time``. With
    ``keep_result=True`` the handler ends the execution by returning anything but a
    ``NextAt``, and that value is its result.
    """

    return _decorator(
        CustomTask,
        options,
        _OneTimeOptions.__optional_keys__,
        name=name,
        payload_type=payload_type,
    )


TaskT = TypeVar("TaskT", bound="Task[Any]")


def _decorator(
    cls: type[TaskT], options: Mapping[str, Any], known: frozenset[str], **fields: Any
) -> Callable[[Handler[Any]], TaskT]:
    """A decorator that builds ``cls(handler=<the function>, **fields, **options)``.

    An option not among the ``known`` names fails here, as a keyword its decorator's
    signature lacked would: ``recurring(..., max_retries=3)`` is a ``TypeError`` at once,
    even though a ``RecurringTask`` has the field.
    """
    for key in options:
        if key not in known:
            raise TypeError(f"{cls.kind}() got an unexpected keyword argument {key!r}")
    fields.update(options)
    if fields.get("upcasters", ...) is None:
        del fields["upcasters"]  # none: the field's default
    return lambda handler: cls(handler=handler, **fields)


# --- checks -------------------------------------------------------------------------------


def _check_callable(task_name: str, field_name: str, fn: object, *, arity: int) -> None:
    if not callable(fn):
        raise TaskDefinitionError(f"task {task_name!r}: {field_name} must be callable, got {fn!r}")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins and some C callables have no signature to check
    try:
        signature.bind(*([None] * arity))
    except TypeError:
        raise TaskDefinitionError(
            f"task {task_name!r}: {field_name} {fn!r} must accept {arity} positional "
            f"argument{'s' if arity > 1 else ''}; its signature is {signature}"
        ) from None


def _check_upcasters(task: Task[Any]) -> dict[int, Upcaster]:
    """``task.upcasters`` as a dict of its own, once ``payload_version`` and they agree:
    one callable of one argument for each version from 1 to ``payload_version - 1``."""
    name, version, upcasters = task.name, task.payload_version, task.upcasters
    check_payload_version(name, "payload_version", version)
    if not isinstance(upcasters, Mapping):
        raise TaskDefinitionError(
            f"task {name!r}: upcasters must be a mapping of versions to callables, "
            f"got {upcasters!r}"
        )
    for key, fn in upcasters.items():
        if not is_int(key) or not 1 <= key < version:
            raise TaskDefinitionError(
                f"task {name!r}: upcasters has a key {key!r}; with payload_version={version} "
                f"its keys are the earlier versions, ints from 1 to {version - 1} "
                "(upcaster k turns a version-k payload into version k+1's)"
            )
        _check_callable(name, f"upcasters[{key}]", fn, arity=1)
    missing = [k for k in range(1, version) if k not in upcasters]
    if missing:
        raise TaskDefinitionError(
            f"task {name!r}: payload_version={version} needs an upcaster for each earlier "
            f"version; upcasters has none for {', '.join(map(str, missing))}"
        )
    return dict(upcasters)


def _check_retry_policy(task: Task[Any]) -> None:
    """Check (and normalise) the task's retry options: its error types as tuples of
    exception classes, ``should_retry`` a plain function of two arguments, its backoff
    within the config's bounds for the same settings, ``retry_jitter`` from 0 to 1."""
    name = task.name
    if task.retry_on is not None:
        object.__setattr__(task, "retry_on", _error_types(name, "retry_on", task.retry_on))
    object.__setattr__(task, "give_up_on", _error_types(name, "give_up_on", task.give_up_on))
    if task.should_retry is not None:
        _check_callable(name, "should_retry", task.should_retry, arity=2)
        if _is_async(task.should_retry):
            raise TaskDefinitionError(
                f"task {name!r}: should_retry must be a plain function (it is called, not "
                f"awaited, as the failure is recorded), got {task.should_retry!r}"
            )
    for setting in ("retry_base_delay", "retry_backoff_rate", "retry_max_delay"):
        value = getattr(task, setting)
        if value is None:
            continue
        try:
            object.__setattr__(task, setting, read_setting(setting, value))
        except ValueError as exc:
            raise TaskDefinitionError(f"task {name!r}: {setting} {exc}, got {value!r}") from None
    base, cap = task.retry_base_delay, task.retry_max_delay
    if base is not None and cap is not None and cap < base:
        raise TaskDefinitionError(
            f"task {name!r}: retry_max_delay must be at least retry_base_delay ({base!r}), "
            f"got {cap!r}"
        )
    jitter = task.retry_jitter
    if not isinstance(jitter, (int, float)) or isinstance(jitter, bool) or not 0 <= jitter <= 1:
        raise TaskDefinitionError(
            f"task {name!r}: retry_jitter must be a fraction from 0 to 1, got {jitter!r}"
        )


def _error_types(task_name: str, field_name: str, value: object) -> tuple[type[BaseException], ...]:
    """``value``, an exception class or a tuple or list of them, as a tuple."""
    types = (value,) if isinstance(value, type) else value
    if isinstance(types, (tuple, list)) and all(
        isinstance(t, type) and issubclass(t, BaseException) for t in types
    ):
        return tuple(types)
    raise TaskDefinitionError(
        f"task {task_name!r}: {field_name} must be an exception class or a tuple of them, "
        f"got {value!r}"
    )


def _check_timeout(task_name: str, value: object) -> timedelta | None:
    """``value`` as a positive ``timedelta`` (numbers are seconds), or ``None``."""
    if value is None:
        return None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TaskDefinitionError(
            f"task {task_name!r}: timeout must be a timedelta or a number of seconds, got {value!r}"
        )
    if not math.isfinite(seconds) or seconds <= 0 or seconds > 100 * 365 * 86400:
        raise TaskDefinitionError(
            f"task {task_name!r}: timeout must be more than 0 and at most 100 years, got {value!r}"
        )
    return value if isinstance(value, timedelta) else timedelta(seconds=seconds)


def _check_rate_limit(task_name: str, value: object) -> RateLimit | None:
    """``value`` (a ``RateLimit`` or its text) as a ``RateLimit``, or ``None``."""
    if value is None or isinstance(value, RateLimit):
        return value
    if not isinstance(value, str):
        raise TaskDefinitionError(
            f"task {task_name!r}: rate_limit must be a RateLimit or text such as '100/m', "
            f"got {value!r}"
        )
    try:
        return RateLimit.parse(value)
    except TaskDefinitionError as exc:
        raise TaskDefinitionError(f"task {task_name!r}: rate_limit: {exc}") from None


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - callable objects with async __call__
    return call is not None and inspect.iscoroutinefunction(call)
