"""The values the scheduler passes around, with no upward imports.

A row of the table is an [`Execution`][sqla_scheduler.executions.Execution]; what is to be
inserted is a [`TaskInstance`][sqla_scheduler.tasks.TaskInstance]; what a custom handler
returns is a [`NextAt`][sqla_scheduler.tasks.NextAt]. The public modules (``tasks``,
``executions``) re-export them; every other module of the package imports them from here,
so values sit on the lowest floor and nothing below the scheduler reaches up to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, ClassVar, Generic, Literal, TypeVar

from sqlalchemy.engine import RowMapping

from sqla_scheduler._checks import (
    check_aware,
    check_instance_id,
    check_payload_version,
    check_priority,
    check_task_name,
)
from sqla_scheduler._payload import normalize_json
from sqla_scheduler._progress import Progress
from sqla_scheduler._types import load_json
from sqla_scheduler.exceptions import TaskDefinitionError

__all__ = [
    "EXECUTION_SORTS",
    "KEEP",
    "RECURRING_INSTANCE_ID",
    "WAITING",
    "Execution",
    "ExecutionAction",
    "ExecutionState",
    "ExecutionStatus",
    "GroupPlan",
    "Key",
    "NextAt",
    "TaskInstance",
    "check_aware",
    "group_plan",
    "instance_values",
]

P = TypeVar("P")

Key = tuple[str, str]
"""An execution's primary key: (task name, instance id)."""

RECURRING_INSTANCE_ID = "recurring"
"""The instance id of a recurring task's single row."""

WAITING = datetime(9999, 1, 1, tzinfo=timezone.utc)
"""The execution time of a group's callback until its members have finished: later than
any time a scheduler picks, sleeps until or shows as next, so that the pick statements
need no condition of their own for it (every database stores it)."""


class _Keep:
    """Sentinel: leave the payload as it is."""

    _instance: ClassVar[_Keep | None] = None

    def __new__(cls) -> _Keep:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "KEEP"

    def __reduce__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()
"""Passed as a payload, keeps the stored payload unchanged."""


@dataclass(frozen=True, slots=True)
class NextAt(Generic[P]):
    """Returned by a custom task's handler: run again at ``at`` with ``payload``.

    Without a payload the current one is kept. Returning ``None`` ends the task.
    """

    at: datetime
    payload: P = KEEP

    def __post_init__(self) -> None:
        check_aware(self.at, "NextAt.at")


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskInstance(Generic[P]):
    """One execution to schedule: a task name, an instance id, a payload and a time.

    Made by [`OneTimeTask.instance`][]; the payload is already in its JSON form.
    """

    task_name: str
    instance_id: str
    data: Any
    """The payload's JSON form, as stored in ``task_data``."""
    execution_time: datetime | None
    """When it becomes due; ``None`` means now."""
    priority: int
    schedule: str | None = None
    """The text form of a recurring schedule, ``None`` for one-time and custom tasks."""
    payload_version: int = 1
    """The version of the payload's shape: the task's ``payload_version`` when the task
    made it."""

    def __post_init__(self) -> None:
        """Check every field, however the instance was made, and store the payload as the
        database gives it back (``PayloadError``, ``TaskDefinitionError``)."""
        check_task_name(self.task_name)
        check_instance_id(self.task_name, self.instance_id)
        if self.execution_time is not None:
            check_aware(self.execution_time, f"task {self.task_name!r}: at")
        check_priority(self.task_name, "priority", self.priority)
        check_payload_version(self.task_name, "payload_version", self.payload_version)
        if self.schedule is not None and not isinstance(self.schedule, str):
            raise TaskDefinitionError(
                f"task {self.task_name!r}: schedule must be its text form, got {self.schedule!r}"
            )
        object.__setattr__(self, "data", normalize_json(self.task_name, self.data))


def instance_values(
    instance: TaskInstance[Any], now: datetime, trace_context: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The values of the row that schedules ``instance``, by column name (due ``now``
    when it has no time)."""
    return {
        "task_name": instance.task_name,
        "task_instance": instance.instance_id,
        "task_data": instance.data,
        "execution_time": instance.execution_time or now,
        "priority": instance.priority,
        "schedule": instance.schedule,
        "trace_context": trace_context,
        "payload_version": instance.payload_version,
    }


@dataclass(frozen=True, slots=True)
class GroupPlan:
    """Executions to schedule as a group: ``members``, then each of ``then`` in turn
    (each waits for the one before it); ``whole``: nothing at all when a member's key is
    taken (a chain's first link)."""

    members: Sequence[TaskInstance[Any]]
    then: Sequence[TaskInstance[Any]] = ()
    whole: bool = False


def group_plan(members: object, then: object = None, *, whole: bool = False) -> GroupPlan:
    """``members`` and ``then`` (one instance, a list of them, or ``None``) as a checked
    ``GroupPlan``: each an instance of a one-time or custom task (``TypeError`` naming
    what is not), since a recurring task's instance never finishes."""
    if isinstance(members, (str, bytes)) or not isinstance(members, Iterable):
        raise TypeError(f"expected TaskInstances (made by task.instance(...)), got {members!r}")
    found = list(members)
    links: tuple[Any, ...] = ()
    if then is not None:
        links = (then,) if isinstance(then, TaskInstance) else tuple(_sequence("then", then))
        if not links:
            raise TypeError("then must be a TaskInstance or a non-empty list of them, got []")
    for instance in (*found, *links):
        if not isinstance(instance, TaskInstance):
            raise TypeError(
                f"expected TaskInstances (made by task.instance(...)), got {instance!r}"
            )
        if instance.schedule is not None:
            raise TypeError(
                f"task {instance.task_name!r}: a recurring task's instance cannot be in a "
                "group or a chain (it never finishes)"
            )
    _check_own_keys(found, links)
    return GroupPlan(found, links, whole=whole)


def _check_own_keys(members: Sequence[TaskInstance[Any]], links: Sequence[Any]) -> None:
    """Refuse, before any statement, a callback whose key is another callback's or a
    member's: it could never be scheduled beside them."""
    taken = {(m.task_name, m.instance_id): "a member's" for m in members}
    for link in links:
        key = (link.task_name, link.instance_id)
        if key in taken:
            raise ValueError(
                f"then: the callback {link.task_name}/{link.instance_id} has {taken[key]} key; "
                "a callback needs a key of its own, so nothing was scheduled"
            )
        taken[key] = "another callback's"


def _sequence(name: str, value: object) -> Sequence[Any]:
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a TaskInstance or a non-empty list of them, got {value!r}")
    return value


ExecutionState = Literal["all", "scheduled", "due", "running", "failing", "orphaned"]
"""Which executions to list: ``scheduled`` (every unpicked row), ``due`` (unpicked and due
now), ``running`` (picked), ``failing`` (one or more consecutive failures),
``orphaned`` (task names this scheduler does not know), or ``all``.
"""

ExecutionStatus = Literal["running", "orphaned", "waiting", "failing", "due", "scheduled"]
"""What one execution is doing, as ``Execution.status`` tells it."""

#: The sort keys of an execution listing: the columns each orders by (then by key).
EXECUTION_SORTS: dict[str, tuple[str, ...]] = {
    "due": ("execution_time",),
    "task": ("task_name",),
    "instance": ("task_instance",),
    "priority": ("priority",),
    "failures": ("consecutive_failures",),
    "last_failure": ("last_failure",),
}

ExecutionAction = Literal["retry", "delete", "cancel"]
"""The bulk actions on executions: ``retry`` makes the failing ones due now, ``delete``
removes them, ``cancel`` asks the processes running them to stop them."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    """A snapshot of one row of the scheduler's table."""

    task_name: str
    instance_id: str
    data: Any
    """The stored payload in its JSON form (not decoded)."""
    execution_time: datetime
    picked: bool
    picked_by: str | None
    last_heartbeat: datetime | None
    last_success: datetime | None
    last_failure: datetime | None
    consecutive_failures: int
    version: int
    priority: int
    schedule: str | None
    trace_context: dict[str, str] | None = None
    """The trace context captured when the execution was scheduled (W3C ``traceparent``
    and ``tracestate``), when an interceptor captured one.
    """
    started_at: datetime | None = None
    """When the handler of this picked execution started; ``None`` while it waits."""
    last_error: str | None = None
    """The error of the last attempt, if it failed: the exception's type and message on
    the first line, then its traceback, cut to a few KB. A success clears it."""
    payload_version: int = 1
    """The version the payload was written with (see the task's ``payload_version``);
    rows written before versions were recorded read as 1."""
    group_id: int | None = None
    """The group this execution is a member of (``Scheduler.schedule_group``), if any."""
    awaits: int | None = None
    """The group this execution is the callback of, if any: it waits (at ``WAITING``)
    until every member of that group has finished."""
    snoozes: int = 0
    """How many times its handler snoozed (raised ``Snooze``) since the execution was
    scheduled or last succeeded; a failure keeps the count."""
    progress: Progress | None = None
    """The latest progress its running handler reported (``ctx.report_progress``), as
    written to the row at most once a second; ``None`` when none was, and once the
    execution finishes."""
    stop_requested_at: datetime | None = None
    """When ``cancel`` asked the process running this execution to stop it; ``None``
    unless a stop was requested. The execution ends ``cancelled`` soon after."""

    @property
    def waiting(self) -> bool:
        """Whether this callback still waits for its group's members."""
        return self.awaits is not None and self.execution_time >= WAITING

    @classmethod
    def from_row(cls, row: RowMapping) -> Execution:
        """Build from a row as the statements load it (``Shapes.loaded_columns``: the JSON
        columns as text, parsed here)."""
        context = load_json(row.get("trace_context"))
        return cls(
            task_name=row["task_name"],
            instance_id=row["task_instance"],
            data=load_json(row["task_data"]),
            execution_time=row["execution_time"],
            picked=row["picked"],
            picked_by=row["picked_by"],
            last_heartbeat=row["last_heartbeat"],
            last_success=row["last_success"],
            last_failure=row["last_failure"],
            consecutive_failures=row["consecutive_failures"],
            version=row["version"],
            priority=row["priority"],
            schedule=row["schedule"],
            trace_context=context if isinstance(context, dict) else None,
            started_at=row.get("started_at"),
            last_error=row.get("last_error"),
            payload_version=row.get("payload_version", 1),
            group_id=row.get("group_id"),
            awaits=row.get("awaits"),
            snoozes=row.get("snoozes", 0),
            progress=_progress_of(row),
            stop_requested_at=row.get("stop_requested_at"),
        )

    def status(self, now: datetime, known_tasks: Collection[str] | None = None) -> ExecutionStatus:
        """One word for what this execution is doing at ``now``.

        ``running`` when a scheduler has picked it; ``orphaned`` when ``known_tasks`` is
        given and does not name its task; ``waiting`` when it is a group's callback whose
        members have not all finished; ``failing`` when its last attempt failed (it waits
        for a retry); ``due`` when its time has come; ``scheduled`` otherwise.
        """
        if self.picked:
            return "running"
        if known_tasks is not None and self.task_name not in known_tasks:
            return "orphaned"
        if self.waiting:
            return "waiting"
        if self.consecutive_failures > 0:
            return "failing"
        if self.execution_time <= now:
            return "due"
        return "scheduled"

    def to_json(self) -> dict[str, Any]:
        """Every field in a JSON-ready dict: timestamps in ISO 8601 UTC, the payload as stored."""
        return {f.name: _json_value(getattr(self, f.name)) for f in dataclasses.fields(Execution)}


def _progress_of(row: RowMapping) -> Progress | None:
    """The progress a row holds, or ``None`` when its handler has reported none."""
    at = row.get("progress_at")
    if at is None:
        return None
    return Progress(row.get("progress"), row.get("progress_message"), at)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).isoformat()
    if isinstance(value, Progress):
        return {"fraction": value.fraction, "message": value.message, "at": _json_value(value.at)}
    return value
