"""What a handler receives: the execution context."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sqla_scheduler._execution import GroupPlan, TaskInstance, group_plan
from sqla_scheduler._progress import checked_report
from sqla_scheduler.exceptions import ExecutionCancelled

if TYPE_CHECKING:
    from sqla_scheduler.groups import Group

__all__ = ["ExecutionContext", "ProgressReported", "ShutdownSignal", "SignalState"]

P = TypeVar("P")


class SignalState:
    """What ``ShutdownSignal.is_set`` gives: true or false, either way it is asked.

    ``if ctx.shutdown.is_set():`` (as with ``threading.Event``) and ``if
    ctx.shutdown.is_set:`` are both right; it compares equal to the ``bool`` it stands for.
    """

    __slots__ = ("_value",)

    def __init__(self, value: bool) -> None:
        self._value = value

    def __call__(self) -> bool:
        """The state as a ``bool``: ``ctx.shutdown.is_set()``."""
        return self._value

    def __bool__(self) -> bool:
        return self._value

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SignalState):
            return self._value == other._value
        return self._value == other

    def __hash__(self) -> int:
        return hash(self._value)

    def __repr__(self) -> str:
        return repr(self._value)


class ShutdownSignal:
    """Set when the scheduler running an execution starts to stop, or when the execution
    reaches its task's ``timeout``; as ``ctx.cancelled``, when ``cancel`` asks the
    execution to stop.

    Long handlers poll ``ctx.shutdown.is_set()`` (or call [`wait`][]) and wind up early.
    What the
    handler then does decides the outcome as usual: returning commits a success, raising
    schedules a retry (past its timeout, an attempt fails either way). A handler still
    running after ``shutdown_max_wait`` is abandoned by the scheduler and its execution
    released, so another process takes it at once.
    """

    __slots__ = ("__weakref__", "_children", "_event")

    def __init__(self) -> None:
        # made when first needed: most signals are never set nor waited for, and the
        # runner makes one per execution (``ctx.cancelled``)
        self._event: threading.Event | None = None
        self._children: weakref.WeakSet[ShutdownSignal] | None = None

    @property
    def is_set(self) -> SignalState:
        """Whether the scheduler is stopping (or the execution's time is up): call it like
        ``threading.Event.is_set()`` or test it as it is; both are right."""
        event = self._event
        return _SET if event is not None and event.is_set() else _CLEAR

    def set(self) -> None:
        """Signal shutdown (the runner calls this; tests may too), to the signals made
        with [`child`][] too."""
        self._made().set()
        for child in list(self._children or ()):
            child.set()

    def child(self) -> ShutdownSignal:
        """A signal of its own that is also set when this one is: one execution's."""
        signal = ShutdownSignal()
        with _MAKING:
            if self._children is None:
                self._children = weakref.WeakSet()
            self._children.add(signal)
        if self.is_set:
            signal.set()
        return signal

    def wait(self, timeout: float | None = None) -> bool:
        """Block a sync handler up to ``timeout`` seconds for shutdown; return whether it came."""
        return self._made().wait(timeout)

    def _made(self) -> threading.Event:
        """The event, made once whichever thread asks first."""
        event = self._event
        if event is None:
            with _MAKING:
                if self._event is None:
                    self._event = threading.Event()
                event = self._event
        return event

    def __repr__(self) -> str:
        return f"ShutdownSignal(is_set={self.is_set!r})"


#: Makes a signal's event and children once, whichever thread comes first.
_MAKING = threading.Lock()
_SET = SignalState(True)
_CLEAR = SignalState(False)


class ProgressReported:
    """What ``ExecutionContext.report_progress`` returns: the report is already taken, so
    a sync handler ignores it and an async one may ``await`` it, which returns at once."""

    __slots__ = ()

    def __await__(self) -> Generator[None, None, None]:
        return
        yield  # a generator that ends at once: nothing to wait for

    def __repr__(self) -> str:
        return "ProgressReported()"


_REPORTED = ProgressReported()


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionContext(Generic[P]):
    """Everything a handler knows about the execution it is running.

    Build one directly to call a handler in a test:

    ```python
    ctx = ExecutionContext(payload={"order": 7}, task_name="send-email",
                           instance_id="order-7", execution_time=now)
    send_email(ctx)
    ```
    """

    payload: P
    """The decoded payload (an instance of the task's ``payload_type`` when it has one)."""
    task_name: str
    """The task's name."""
    instance_id: str
    """The instance id of this execution."""
    execution_time: datetime
    """When this execution was due."""
    consecutive_failures: int = 0
    """How many attempts before this one failed in a row (0 on a first attempt)."""
    last_error: str | None = None
    """The error of the previous attempt when it failed (see ``Execution.last_error``),
    else ``None``. In the ``on_abandon`` hook: the error of the attempt that failed last.
    """
    snoozes: int = 0
    """How many times this execution has snoozed (raised ``Snooze``) since it was
    scheduled or, for a recurring or custom task, since its last success: 0 on its first
    run. A failure and its retry keep the count."""
    priority: int = 0
    """The execution's priority."""
    shutdown: ShutdownSignal = field(default_factory=ShutdownSignal)
    """Set when the scheduler is stopping or the attempt reached its task's ``timeout``;
    long handlers should poll it."""
    cancelled: ShutdownSignal = field(default_factory=ShutdownSignal)
    """Set when ``cancel`` asked the process running this execution to stop it. An async
    handler is cancelled then; a sync one should poll it (``ctx.cancelled.is_set()``,
    ``ctx.cancelled.wait(timeout)``, or ``raise_if_cancelled``) and wind up. Whatever the
    handler does after that, the execution ends ``cancelled``."""
    trace_context: Mapping[str, str] | None = None
    """The trace context captured when this execution was scheduled (see
    ``ExecutionInterceptor.capture_context``), if any.
    """
    session: Any = field(default=None, repr=False)
    """For a task defined with ``transactional=True``: a ``Session`` (sync handler) or an
    ``AsyncSession`` (async handler) in the transaction that records this execution's
    outcome. Its changes commit if and only if the success is recorded; do not commit it
    yourself (a ``commit`` only flushes). ``None`` for other tasks."""
    group: Group | None = None
    """For a group's callback: the group, with each member's outcome and result in
    ``members``. ``None`` for other executions."""
    _report: Callable[[float | None, str | None], None] | None = field(default=None, repr=False)
    _scheduled: list[TaskInstance[Any]] = field(default_factory=list, repr=False)
    _plans: list[GroupPlan] = field(default_factory=list, repr=False)

    @property
    def shutting_down(self) -> bool:
        """The same as ``shutdown.is_set()``."""
        return self.shutdown.is_set()

    def raise_if_cancelled(self) -> None:
        """Raise ``ExecutionCancelled`` if ``cancel`` asked this execution to stop
        (``cancelled`` is set): a sync handler's check between two steps of its work."""
        if self.cancelled.is_set():
            raise ExecutionCancelled(
                f"{self.task_name}/{self.instance_id} was cancelled while it ran"
            )

    def report_progress(
        self, fraction: float | None = None, message: str | None = None
    ) -> ProgressReported:
        """Report how far this execution has come: ``fraction`` from 0 to 1, a
        ``message`` of what it is doing, or both. Call it as often as you like, from a
        sync handler as it is and from an async one with ``await``: it costs no statement
        and no wait. The latest report is written to the row at most once a second and
        read as ``Execution.progress``; a report made just before the handler ends may
        never be written, and the progress is cleared when the execution finishes.

        A message longer than ``MAX_PROGRESS_MESSAGE`` (1,024) characters is cut to it. A
        fraction that is not a number from 0 to 1, or a message that is not a ``str`` a
        database can store (a NUL character, a lone surrogate), raises a ``ValueError``
        or ``TypeError`` naming the execution and the value."""
        checked = checked_report(f"{self.task_name}/{self.instance_id}", fraction, message)
        if self._report is not None:
            self._report(*checked)
        return _REPORTED

    def schedule(
        self,
        instance: TaskInstance[Any],
        *,
        then: TaskInstance[Any] | Sequence[TaskInstance[Any]] | None = None,
    ) -> None:
        """Schedule a further execution, committed together with this execution's success
        (and ``then``, as ``Scheduler.schedule`` does: a chain).

        If this execution fails, what it scheduled is discarded with it.
        """
        if then is None:
            self._scheduled.append(instance)
        else:
            self._plans.append(group_plan([instance], then, whole=True))

    def schedule_group(
        self,
        instances: Sequence[TaskInstance[Any]],
        *,
        then: TaskInstance[Any] | Sequence[TaskInstance[Any]] | None = None,
    ) -> None:
        """Schedule a group, as ``Scheduler.schedule_group`` does, committed together with
        this execution's success. A callback whose key is taken then is not scheduled, nor
        is the group: the scheduler logs a warning naming it (``Scheduler.schedule_group``
        raises instead)."""
        self._plans.append(group_plan(instances, then))

    @property
    def plans(self) -> tuple[GroupPlan, ...]:
        """The groups and chains this execution has scheduled so far."""
        return tuple(self._plans)

    @property
    def scheduled(self) -> tuple[TaskInstance[Any], ...]:
        """The instances this execution has scheduled so far."""
        return tuple(self._scheduled)
