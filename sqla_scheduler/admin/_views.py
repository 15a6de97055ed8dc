"""What the admin page shows, computed from rows and task definitions; no I/O here.

Each view has a ``to_json`` that the JSON endpoints return, so the HTML pages and the API
show the same facts: an execution's status, its heartbeat's health, a schedule in words.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, cast

from sqla_scheduler._console import Listed
from sqla_scheduler._durations import format_duration
from sqla_scheduler._history_entry import REQUEUEABLE
from sqla_scheduler._progress import whole_percent
from sqla_scheduler._result import RESULT_OUTCOMES
from sqla_scheduler.config import SchedulerConfig
from sqla_scheduler.exceptions import InvalidScheduleError
from sqla_scheduler.executions import Execution
from sqla_scheduler.groups import Group
from sqla_scheduler.history import HistoryEntry, HistorySetting, Outcome, keeps
from sqla_scheduler.nodes import ALIVE_INTERVALS, Node
from sqla_scheduler.schedules import (
    Cron,
    Daily,
    Disabled,
    FixedDelay,
    FixedRate,
    Schedule,
    parse_schedule,
)
from sqla_scheduler.tasks import RecurringTask, Task, TaskKind

__all__ = [
    "COUNTED_OUTCOMES",
    "PREVIEW_CHARS",
    "RESULT_PREVIEW_CHARS",
    "STATES",
    "CallbackView",
    "EntryView",
    "ExecutionView",
    "GroupView",
    "NodesView",
    "RecurringView",
    "ResultView",
    "TaskView",
    "counted_outcomes",
    "describe_schedule",
    "elapsed",
    "heartbeat_health",
    "iso",
    "outcomes_window",
    "relative",
    "view_callback",
    "view_entry",
    "view_execution",
    "view_group",
    "view_listed_entry",
    "view_recurring",
    "view_result",
    "view_tasks",
]

#: The states an execution listing can show, in the order the page shows them.
STATES = ("all", "scheduled", "due", "running", "failing", "orphaned")
#: The task kinds, in the order the page shows them.
KINDS: tuple[TaskKind, ...] = ("recurring", "one_time", "custom")

#: ``ok``, ``late`` (no heartbeat for over two intervals) or ``dead`` (none for longer
#: than ``dead_after``: the scheduler is presumed crashed and the execution will be revived).
Health = Literal["ok", "late", "dead"]
#: What an execution is doing: ``running`` (picked), ``waiting`` (a group's callback, until
#: every member of its group has finished), ``failing`` (waiting for a retry), ``due``
#: (waiting to be picked) or ``scheduled`` (waiting for its time).
Status = Literal["running", "waiting", "failing", "due", "scheduled"]

_PREVIEW = 80


def iso(value: datetime | None) -> str | None:
    """ISO 8601 text of an aware datetime, or ``None``."""
    return None if value is None else value.isoformat()


def relative(delta: timedelta) -> str:
    """``delta`` to the nearest unit a person reads at a glance: ``45 s``, ``3 min``, ``2 h
    5 min``, ``4 d 3 h``."""
    seconds = int(abs(delta).total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes, _ = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def elapsed(delta: timedelta) -> str:
    """How long an attempt ran, to the precision its length calls for: ``4 ms``, ``1.25 s``,
    ``42.1 s``, then as ``relative`` puts it."""
    seconds = delta.total_seconds()
    if seconds < 1:
        return f"{round(seconds * 1000)} ms"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    return relative(delta)


def heartbeat_health(
    last_heartbeat: datetime | None, now: datetime, config: SchedulerConfig
) -> Health | None:
    """How fresh a running execution's heartbeat is; ``None`` when it has none."""
    if last_heartbeat is None:
        return None
    age = now - last_heartbeat
    if age > config.dead_after:
        return "dead"
    if age > 2 * config.heartbeat_interval:
        return "late"
    return "ok"


def _cron_words(expr: str) -> str | None:
    try:
        from cron_descriptor import Options, get_description
    except ImportError:  # pragma: no cover - cron-descriptor comes with the admin extra
        return None
    options = Options()
    options.throw_exception_on_parse_error = True
    options.use_24hour_time_format = True
    options.verbose = False
    try:
        words: str = get_description(expr, options)
    except Exception:  # cron-descriptor raises plain Exception subclasses and more
        return None
    return words


def _zone_suffix(tz: str) -> str:
    return "" if tz == "UTC" else f" ({tz})"


def describe_schedule(text: str | None) -> str | None:
    """A schedule's text form in words (``CRON|0 */15 * * * ?`` is "Every 15 minutes");
    the text itself when it cannot be put in words, ``None`` for no schedule."""
    if text is None:
        return None
    try:
        schedule: Schedule = parse_schedule(text)
    except InvalidScheduleError:
        return text
    if isinstance(schedule, Cron):
        words = _cron_words(schedule.expr)
        return text if words is None else words + _zone_suffix(schedule.tz)
    if isinstance(schedule, FixedRate):
        words = f"Every {format_duration(schedule.every)}"
        if schedule.initial_delay:
            words += f", first after {format_duration(schedule.initial_delay)}"
        return words
    if isinstance(schedule, FixedDelay):
        words = f"{format_duration(schedule.after)} after each run completes"
        if schedule.initial_delay:
            words += f", first after {format_duration(schedule.initial_delay)}"
        return words.capitalize()
    if isinstance(schedule, Daily):
        times = ", ".join(t.strftime("%H:%M:%S" if t.second else "%H:%M") for t in schedule.times)
        return f"Daily at {times}{_zone_suffix(schedule.tz)}"
    if isinstance(schedule, Disabled):
        return "Disabled"
    return text  # pragma: no cover - every kind is handled above


def _status(execution: Execution, now: datetime) -> Status:
    # without the known tasks an execution is never "orphaned": every other status is one
    return cast(Status, execution.status(now))


def _pretty(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False, default=str)


def _preview(data: Any) -> str:
    return _shorten(json.dumps(data, sort_keys=True, ensure_ascii=False, default=str))


def _shorten(text: str, length: int = _PREVIEW) -> str:
    return text if len(text) <= length else text[: length - 1] + "…"


#: How many characters of a payload's JSON text a listing reads: one more than a preview
#: shows, so that a longer payload is seen to be cut.
PREVIEW_CHARS = _PREVIEW + 1
#: How many characters of a kept result's value the results listing shows: more than of a
#: payload, since the value is what the page is read for.
_RESULT_PREVIEW = 200
#: How many it reads, one more, as ``PREVIEW_CHARS``.
RESULT_PREVIEW_CHARS = _RESULT_PREVIEW + 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionView:
    """One execution as the page shows it."""

    execution: Execution
    status: Status
    #: The task's kind, or ``None`` for an orphan (a task name not registered here).
    kind: TaskKind | None
    #: How long since the last heartbeat of a running execution.
    heartbeat_age: timedelta | None
    health: Health | None
    #: How far the execution time is from now (negative: in the past).
    due_in: timedelta
    #: The payload as indented JSON text (``None`` in listings, which read only a
    #: preview), and a one-line preview of it.
    payload: str | None
    payload_preview: str
    #: The first line of the last error (its type and message), cut to a preview's
    #: length; ``None`` when it has none.
    error_line: str | None = None

    @property
    def orphaned(self) -> bool:
        """Whether no task of this name is registered in this scheduler."""
        return self.kind is None

    @property
    def progress_percent(self) -> int | None:
        """The fraction its running handler last reported, in whole percent rounded down
        (100 only for a report of 1); ``None`` when it reported none, or a message alone."""
        progress = self.execution.progress
        if progress is None or progress.fraction is None:
            return None
        return whole_percent(progress.fraction)

    @property
    def reported(self) -> bool:
        """Whether its running handler has reported a fraction or a message to show."""
        progress = self.execution.progress
        return progress is not None and (progress.fraction is not None or bool(progress.message))

    @property
    def progress_preview(self) -> str | None:
        """The start of its running handler's latest message, as a listing's line shows it
        (cut to a preview's length; its title has it whole); ``None`` when there is none."""
        progress = self.execution.progress
        return None if progress is None or not progress.message else _shorten(progress.message)

    def _progress_json(self) -> dict[str, Any] | None:
        progress = self.execution.progress
        if progress is None:
            return None
        return {
            "fraction": progress.fraction,
            "percent": self.progress_percent,
            "message": progress.message,
            "at": iso(progress.at),
        }

    def to_json(self) -> dict[str, Any]:
        """The view as JSON-ready values (datetimes as ISO 8601 text)."""
        e = self.execution
        return {
            "task_name": e.task_name,
            "instance_id": e.instance_id,
            "kind": self.kind,
            "orphaned": self.orphaned,
            "status": self.status,
            "execution_time": iso(e.execution_time),
            "priority": e.priority,
            "picked": e.picked,
            "picked_by": e.picked_by,
            "last_heartbeat": iso(e.last_heartbeat),
            "heartbeat_age_seconds": (
                None if self.heartbeat_age is None else self.heartbeat_age.total_seconds()
            ),
            "heartbeat_health": self.health,
            # the latest report of its running handler, whole (its message is short)
            "progress": self._progress_json(),
            "last_success": iso(e.last_success),
            "last_failure": iso(e.last_failure),
            "consecutive_failures": e.consecutive_failures,
            "error_line": self.error_line,
            "version": e.version,
            "schedule": e.schedule,
            "payload_version": e.payload_version,
            "group_id": e.group_id,
            "awaits": e.awaits,
            "waiting": e.waiting,
            "data_preview": self.payload_preview,
            # in full on the execution's own page; a listing reads only their previews
            **({} if self.payload is None else {"data": e.data, "last_error": e.last_error}),
        }


def view_execution(
    execution: Execution,
    *,
    now: datetime,
    config: SchedulerConfig,
    tasks: Mapping[str, Task[Any]],
    preview: str | None = None,
    error_preview: str | None = None,
) -> ExecutionView:
    """Build the ``ExecutionView`` of ``execution`` as of ``now``.

    With ``preview`` (the start of the payload's JSON text, from a listing), the
    execution's ``data`` and ``last_error`` were not read and the view has no full
    payload; ``error_preview`` is then the start of the last error.
    """
    task = tasks.get(execution.task_name)
    beat = execution.last_heartbeat if execution.picked else None
    return ExecutionView(
        execution=execution,
        status=_status(execution, now),
        kind=None if task is None else task.kind,
        heartbeat_age=None if beat is None else now - beat,
        health=heartbeat_health(beat, now, config),
        due_in=execution.execution_time - now,
        payload=None if preview is not None else _pretty(execution.data),
        payload_preview=_preview(execution.data) if preview is None else _shorten(preview),
        error_line=_error_line(execution.last_error if preview is None else error_preview),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryView:
    """One history entry as the page shows it."""

    entry: HistoryEntry
    #: The first line of the error (its type and message), cut to a preview's length.
    error_line: str | None
    #: A one-line preview of the payload of a requeueable entry (``None`` for the others,
    #: which keep none), and the payload as indented JSON text on the entry's own page.
    payload_preview: str | None
    payload: str | None
    #: Whether the view has the entry's error and payload in full (its own page) or only
    #: their previews (a listing, which reads no more).
    full: bool

    @property
    def requeueable(self) -> bool:
        """Whether the entry is a dead letter, which requeue can schedule again."""
        return self.entry.outcome in REQUEUEABLE

    def to_json(self) -> dict[str, Any]:
        """The view as JSON-ready values (datetimes as ISO 8601 text)."""
        e = self.entry
        return {
            "id": e.id,
            "task_name": e.task_name,
            "instance_id": e.instance_id,
            "outcome": e.outcome,
            "requeueable": self.requeueable,
            "execution_time": iso(e.execution_time),
            "started_at": iso(e.started_at),
            "finished_at": iso(e.finished_at),
            "duration_seconds": None if e.duration is None else e.duration.total_seconds(),
            "picked_by": e.picked_by,
            "attempt": e.attempt,
            "priority": e.priority,
            "payload_version": e.payload_version,
            "error_line": self.error_line,
            "data_preview": self.payload_preview,
            **({"error": e.error, "data": e.data} if self.full else {}),
        }


def _error_line(error: str | None) -> str | None:
    lines = (error or "").splitlines()
    return _shorten(lines[0]) if lines else None


def view_entry(entry: HistoryEntry) -> EntryView:
    """The ``EntryView`` of an entry read in full."""
    kept = entry.outcome in REQUEUEABLE
    return EntryView(
        entry=entry,
        error_line=_error_line(entry.error),
        payload_preview=_preview(entry.data) if kept else None,
        payload=_pretty(entry.data) if kept else None,
        full=True,
    )


def view_listed_entry(
    entry: HistoryEntry, *, data_preview: str | None, error_preview: str | None
) -> EntryView:
    """The ``EntryView`` of an entry of a listing, which read only the first characters of
    its payload's JSON text and of its error."""
    kept = entry.outcome in REQUEUEABLE
    return EntryView(
        entry=entry,
        error_line=_error_line(error_preview),
        # a NULL payload has no JSON text: its preview is that of None
        payload_preview=_shorten("null" if data_preview is None else data_preview)
        if kept
        else None,
        payload=None,
        full=False,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultView:
    """A kept result as the results listing shows it: the start of its value's JSON text
    and the first line of its error, never the whole of either."""

    result: Listed
    #: At most ``_RESULT_PREVIEW`` characters of the value's JSON text (``None`` when the
    #: execution did not succeed and kept no value).
    value_preview: str | None
    #: The first line of the error (its type and message), cut to a preview's length.
    error_line: str | None

    def to_json(self) -> dict[str, Any]:
        """The view as JSON-ready values (datetimes as ISO 8601 text)."""
        r = self.result
        return {
            "id": r.id,
            "task_name": r.task_name,
            "instance_id": r.instance_id,
            "outcome": r.outcome,
            "succeeded": r.outcome == "succeeded",
            "finished_at": iso(r.finished_at),
            "value_preview": self.value_preview,
            "error_line": self.error_line,
        }


def view_result(listed: Listed) -> ResultView:
    """The ``ResultView`` of a result of a listing, which read only the first characters
    of its value's JSON text and of its error."""
    value = listed.value_preview
    return ResultView(
        result=listed,
        value_preview=None if value is None else _shorten(value, _RESULT_PREVIEW),
        error_line=_error_line(listed.error_preview),
    )


#: What a group's callback is doing, as its page says: ``waiting`` for the members,
#: ``due``, ``scheduled`` (a later run or a retry), ``failing``, ``running``; or, out of
#: the table, ``finished`` (gone after its group finished: it ran, unless it was deleted
#: by hand and kept no result), ``cancelled`` (with its group, or by hand with a kept
#: result) or ``deleted`` (gone before its group finished: it will not run).
CallbackState = Literal[
    "waiting", "due", "scheduled", "failing", "running", "finished", "cancelled", "deleted"
]
#: Where a group stands: ``in_progress`` (members have not finished), ``finished``, or
#: ``cancelled`` (``Scheduler.cancel_group``; members running then may finish after).
GroupStatus = Literal["in_progress", "finished", "cancelled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallbackView:
    """A group's callback as the group's page shows it: its row while it is in the table,
    the preview of its kept result once it left (a task with ``keep_result``, or a
    callback cancelled with its group)."""

    task_name: str
    instance_id: str
    state: CallbackState
    execution: ExecutionView | None
    result: ResultView | None

    def to_json(self) -> dict[str, Any]:
        """The view as JSON-ready values (datetimes as ISO 8601 text)."""
        return {
            "task_name": self.task_name,
            "instance_id": self.instance_id,
            "state": self.state,
            "execution": None if self.execution is None else self.execution.to_json(),
            "result": None if self.result is None else self.result.to_json(),
        }


def view_callback(
    group: Group, execution: ExecutionView | None, result: ResultView | None
) -> CallbackView | None:
    """The ``CallbackView`` of ``group``'s callback (``None`` for a group without one):
    ``execution`` is the view of the row at its key, if one is there; ``result`` the
    newest result kept at its key since the group was created, if any.

    A row at the key that does not await ``group`` is another execution (the callback
    ran and the key was scheduled again), so the callback is out of the table."""
    if group.task_name is None or group.instance_id is None:
        return None
    state: CallbackState
    if execution is not None and execution.execution.awaits == group.id:
        result = None
        state = execution.status
    else:
        execution = None
        if result is not None and result.result.finished_at < group.created_at:
            result = None  # kept by an earlier execution with this key
        if result is not None:
            state = "cancelled" if result.result.outcome == "cancelled" else "finished"
        elif group.cancelled_at is not None:
            state = "cancelled"
        else:
            state = "finished" if group.finished else "deleted"
    return CallbackView(
        task_name=group.task_name,
        instance_id=group.instance_id,
        state=state,
        execution=execution,
        result=result,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupView:
    """A group as the admin page shows it: its progress (``done`` of ``total``), its
    finished members counted by outcome, and, on its own page, its callback."""

    group: Group
    callback: CallbackView | None = None

    @property
    def status(self) -> GroupStatus:
        """Whether it was cancelled, has finished, or is in progress."""
        if self.group.cancelled_at is not None:
            return "cancelled"
        return "finished" if self.group.finished else "in_progress"

    @property
    def done(self) -> int:
        """How many members have finished (``Group.done``)."""
        return self.group.done

    @property
    def bar_max(self) -> int:
        """The ``max`` of the progress bar: a ``<progress>`` needs one above 0, so a group
        with no member is a full bar of 1."""
        return max(self.group.total, 1)

    @property
    def bar_value(self) -> int:
        """The ``value`` of the progress bar."""
        return self.done if self.group.total > 0 else 1

    @property
    def percent(self) -> int:
        """How much of the group has finished, in whole percent rounded down (100 only
        when every member has)."""
        return self.bar_value * 100 // self.bar_max

    @property
    def outcomes(self) -> list[tuple[str, int]]:
        """The finished members' outcomes with their counts, in ``RESULT_OUTCOMES`` order
        (any other the table holds after them)."""
        counts = dict(self.group.outcomes)
        known = [(o, counts.pop(o)) for o in RESULT_OUTCOMES if counts.get(o)]
        return known + sorted((o, n) for o, n in counts.items() if n)

    @property
    def uncounted(self) -> int:
        """Finished members with no outcome kept any more: results are pruned after
        ``result_retention``, the group's count is not."""
        return max(self.done - sum(self.group.outcomes.values()), 0)

    def to_json(self) -> dict[str, Any]:
        """The view as JSON-ready values (datetimes as ISO 8601 text)."""
        g = self.group
        return {
            "id": g.id,
            "task_name": g.task_name,
            "instance_id": g.instance_id,
            "status": self.status,
            "total": g.total,
            "remaining": max(g.remaining, 0),
            "done": self.done,
            "outcomes": dict(self.outcomes),
            "created_at": iso(g.created_at),
            "finished_at": iso(g.finished_at),
            "cancelled_at": iso(g.cancelled_at),
            **({} if self.callback is None else {"callback": self.callback.to_json()}),
        }


def view_group(group: Group, callback: CallbackView | None = None) -> GroupView:
    """The ``GroupView`` of ``group`` (with its callback's view on the group's page)."""
    return GroupView(group=group, callback=callback)


#: The outcomes the overview counts for each task, over ``outcomes_window``.
COUNTED_OUTCOMES: tuple[Outcome, ...] = ("succeeded", "failed")

#: The longest time back the overview counts outcomes over: that of the charts' longest
#: span. Counting entries costs what their number costs; a day of them, not all that
#: ``history_retention`` keeps, keeps the page quick on a long history.
OUTCOMES_WINDOW = timedelta(days=1)


def outcomes_window(retention: timedelta) -> timedelta:
    """How far back the overview counts each task's outcomes: a day, or the history's
    retention where that is shorter (nothing older is kept)."""
    return min(retention, OUTCOMES_WINDOW)


def counted_outcomes(setting: HistorySetting) -> tuple[Outcome, ...]:
    """Those of ``COUNTED_OUTCOMES`` that the ``history`` setting records."""
    return tuple(outcome for outcome in COUNTED_OUTCOMES if keeps(setting, outcome))


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskView:
    """A registered task with how many of its executions are in each state, how many of
    its attempts ended in each recorded outcome of ``COUNTED_OUTCOMES`` lately, how
    many of its entries are dead letters, and whether it is paused."""

    name: str
    kind: TaskKind
    #: Whether the task is paused (``Scheduler.pause``): no scheduler picks its executions.
    paused: bool
    priority: int
    max_retries: int | None
    counts: Mapping[str, int]
    #: By outcome, for the outcomes the ``history`` setting records (none with ``none``).
    outcomes: Mapping[str, int]
    #: How many of its entries are dead letters (abandoned or undecodable), however old.
    dead_letters: int

    def to_json(self) -> dict[str, Any]:
        """The view as JSON-ready values."""
        return {
            "name": self.name,
            "kind": self.kind,
            "paused": self.paused,
            "priority": self.priority,
            "max_retries": self.max_retries,
            "counts": dict(self.counts),
            "outcomes": dict(self.outcomes),
            "dead_letters": self.dead_letters,
        }


def view_tasks(
    tasks: Mapping[str, Task[Any]],
    counts: Mapping[str, Mapping[str, int]],
    outcomes: Mapping[str, Mapping[str, int]],
    dead_letters: Mapping[str, int],
    counted: Sequence[Outcome],
    paused: frozenset[str],
) -> dict[TaskKind, list[TaskView]]:
    """The registered tasks by kind, each kind sorted by name, with their ``counted``
    outcomes from ``outcomes`` (by task name, then outcome, as
    ``_store.history.outcome_counts`` counts them), their ``dead_letters`` and whether
    each is in ``paused``."""
    empty = dict.fromkeys(("all", "scheduled", "due", "running", "failing"), 0)
    by_kind: dict[TaskKind, list[TaskView]] = {kind: [] for kind in KINDS}
    for name in sorted(tasks):
        task = tasks[name]
        recorded = outcomes.get(name, {})
        by_kind[task.kind].append(
            TaskView(
                name=name,
                kind=task.kind,
                paused=name in paused,
                priority=task.priority,
                max_retries=task.max_retries,
                counts=counts.get(name, empty),
                outcomes={outcome: recorded.get(outcome, 0) for outcome in counted},
                dead_letters=dead_letters.get(name, 0),
            )
        )
    return by_kind


@dataclass(frozen=True, slots=True, kw_only=True)
class NodesView:
    """The schedulers recorded in the nodes table, each alive or stale as ``Node.alive``
    says (``Scheduler.nodes``)."""

    nodes: Sequence[Node]
    #: The page's ``node_heartbeat_interval``: what a node that does not record its own is
    #: judged by.
    interval: timedelta

    @property
    def alive(self) -> int:
        """How many are alive."""
        return sum(node.alive for node in self.nodes)

    @property
    def stale(self) -> int:
        """How many are listed but not alive: killed, hung, or cut off from the database."""
        return len(self.nodes) - self.alive

    @property
    def stale_after(self) -> timedelta:
        """How long after its last record a node that does not record its own interval is
        stale (one that does: three of its intervals)."""
        return self.interval * ALIVE_INTERVALS

    def to_json(self) -> dict[str, Any]:
        """The view as JSON-ready values, each node as ``Node.to_json`` has it."""
        return {
            "alive": self.alive,
            "stale": self.stale,
            "stale_after_seconds": self.stale_after.total_seconds(),
            "nodes": [node.to_json() for node in self.nodes],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RecurringView:
    """A recurring task: its schedule, and its row when a scheduler has registered it."""

    name: str
    schedule: str
    schedule_words: str
    #: The task's row, ``None`` until a running scheduler registers the task (or while
    #: its schedule is disabled).
    row: ExecutionView | None

    @property
    def owner(self) -> str | None:
        """The scheduler running it now, if one is."""
        return None if self.row is None else self.row.execution.picked_by

    def to_json(self) -> dict[str, Any]:
        """The view as JSON-ready values."""
        e = None if self.row is None else self.row.execution
        return {
            "name": self.name,
            "schedule": self.schedule,
            "schedule_words": self.schedule_words,
            "next_run": None if e is None else iso(e.execution_time),
            "last_success": None if e is None else iso(e.last_success),
            "last_failure": None if e is None else iso(e.last_failure),
            "consecutive_failures": 0 if e is None else e.consecutive_failures,
            "owner": self.owner,
            "execution": None if self.row is None else self.row.to_json(),
        }


def view_recurring(
    tasks: Mapping[str, Task[Any]], rows: Mapping[str, ExecutionView]
) -> list[RecurringView]:
    """The registered recurring tasks with a schedule (one row each), sorted by name, with
    their rows. The instances of one without a schedule are listed with the executions."""
    views: list[RecurringView] = []
    for name in sorted(tasks):
        task = tasks[name]
        if isinstance(task, RecurringTask) and task.schedule is not None:
            text = task.schedule.text
            views.append(
                RecurringView(
                    name=name,
                    schedule=text,
                    schedule_words=describe_schedule(text) or text,
                    row=rows.get(name),
                )
            )
    return views


def to_json_list(views: Sequence[ExecutionView]) -> list[dict[str, Any]]:
    """``to_json`` of each view."""
    return [v.to_json() for v in views]
