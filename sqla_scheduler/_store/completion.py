"""What completing executions records beside their rows: a recorder per feature.

A ``Completion`` is the outcome of one held execution. ``running.complete`` applies the
row changes of a batch of them (removals, hand-backs, moves into history) and learns
which applied: those whose execution was still ours. It then calls ``record``, which
hands those to each recorder in ``RECORDERS``, in the caller's transaction and in this
order:

1. ``scheduled``: the instances each handler scheduled, a statement per completion that
   scheduled some;
2. ``plans``: the groups and chains each handler scheduled;
3. ``history``: the entries the ``history`` setting keeps, in one statement (a row moved
   into history, undecodable or abandoned, took its entry with it);
4. ``results``: the outcomes kept (``keep_result``), in one statement;
5. ``groups``: each group counted down by its members whose rows left the table, a
   statement a group; the count that reaches 0 makes the callback due, with its
   members' results written before it;
6. ``notify``: the schedulers woken on commit for the limited tasks whose place was
   freed, last, once everything they could pick is written.

So a batch sends a statement per feature, not one per execution (but for what handlers
scheduled, which each schedule with their own time). A feature that finishes with an
execution adds a recorder here, not a branch in ``complete``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection

from sqla_scheduler._execution import Execution, GroupPlan, TaskInstance
from sqla_scheduler._history_entry import HistorySetting, Outcome, keeps
from sqla_scheduler._statements import Statements
from sqla_scheduler._store import groups as group_store
from sqla_scheduler._store import history as history_store
from sqla_scheduler._store import results as result_store
from sqla_scheduler._store._shared import notify as _notify
from sqla_scheduler._store.scheduling import insert_instances

__all__ = ["RECORDERS", "Applied", "Completion", "Recorder", "record"]

log = logging.getLogger("sqla_scheduler")


@dataclass(frozen=True, slots=True, kw_only=True)
class Completion:
    """The outcome of one held execution, to commit with others in one transaction.

    ``remove`` deletes the row; ``succeed``, ``fail`` and ``snooze`` hand it back to run
    at ``at`` (``fail`` with ``error``, the attempt's error text; ``succeed`` clears it and
    the snoozes; ``snooze`` keeps both and the payload, with ``snoozes`` counted);
    ``release`` hands it back untouched; ``undecodable`` takes it out of rotation into
    history as ``undecodable`` with its payload, and ``abandon`` for good as
    ``abandoned`` with its payload after ``failures`` (each deletes it when history is
    off). ``scheduled`` are inserted only if the outcome was recorded (the execution was
    still ours). ``outcome`` is what the history table calls it (``None``: nothing to
    record). ``payload_version`` is the version ``succeed``'s ``data`` was written with
    (``None``: the execution's own, for the payload it kept).
    """

    execution: Execution
    kind: Literal["remove", "succeed", "fail", "snooze", "release", "undecodable", "abandon"]
    now: datetime
    at: datetime | None = None
    data: Any = None
    failures: int = 0
    error: str | None = None
    #: The snoozes counted with a ``snooze`` (``ctx.snoozes`` of the next run).
    snoozes: int = 0
    scheduled: Sequence[TaskInstance[Any]] = ()
    outcome: Outcome | None = None
    #: When the handler started, for its history entry.
    started_at: datetime | None = None
    payload_version: int | None = None
    #: The final outcome to keep (a task with ``keep_result``), if the outcome is recorded.
    result: result_store.Kept | None = None
    #: Groups and chains the handler scheduled, scheduled if the outcome is recorded.
    plans: Sequence[GroupPlan] = ()

    @property
    def moves(self) -> bool:
        """Whether the row goes into history with its entry and payload (when history is
        on): an undecodable or abandoned execution."""
        return self.kind == "undecodable" or self.kind == "abandon"

    @property
    def leaves(self) -> bool:
        """Whether the row leaves the table: its group, if any, has a member fewer to wait
        for."""
        return self.kind == "remove" or self.moves

    def entry(self) -> history_store.Entry:
        """The history entry of this outcome (``outcome`` must be set)."""
        assert self.outcome is not None
        e = self.execution
        counted = self.kind == "fail" or self.kind == "abandon"
        attempt = self.failures if counted else max(e.consecutive_failures, 0) + 1
        return history_store.Entry(
            execution=e,
            outcome=self.outcome,
            finished_at=self.now,
            started_at=self.started_at,
            attempt=max(attempt, 1),
            error=self.error,
        )

    def recorded_alone(self, history: HistorySetting) -> bool:
        """Whether committing this outcome is one statement with nothing beside it (a
        removal with no entry to keep and nothing scheduled), so needs no transaction."""
        if self.kind != "remove" or self.scheduled or self.plans or self.result is not None:
            return False
        return self.outcome is None or not keeps(history, self.outcome)


@dataclass(frozen=True, slots=True)
class Applied:
    """The completions of a batch whose row changes applied, in the batch's order, and
    what the recorders are told of the scheduler that committed them."""

    completions: Sequence[Completion]
    #: The batch's time, its first completion's: when the groups it finished finished.
    now: datetime
    #: Which entries the history keeps.
    history: HistorySetting
    #: The tasks with a ``max_concurrency``: a recorded outcome of theirs frees a place.
    notify: frozenset[str] = frozenset()


#: A recorder writes its feature's part of the applied completions, in the caller's
#: transaction; it sends nothing when they have nothing of its feature.
Recorder = Callable[[Connection, Statements, Applied], None]


def scheduled(conn: Connection, statements: Statements, applied: Applied) -> None:
    """Insert the instances each handler scheduled, due at its outcome's time unless
    they name theirs."""
    for c in applied.completions:
        if c.scheduled:
            insert_instances(conn, statements, c.scheduled, c.now)


def plans(conn: Connection, statements: Statements, applied: Applied) -> None:
    """Schedule the groups and chains each handler scheduled. A group whose callback's
    key is taken is not scheduled, and said so (a chain's first link whose key is taken
    is the handler's own business: ``whole``)."""
    for c in applied.completions:
        for plan in c.plans:
            if group_store.schedule(conn, statements, plan, c.now) is None and not plan.whole:
                e = c.execution
                log.warning(
                    "%s/%s scheduled a group whose callback's key is taken (%s); it was not "
                    "scheduled",
                    e.task_name,
                    e.instance_id,
                    ", ".join(f"{then.task_name}/{then.instance_id}" for then in plan.then),
                )


def history(conn: Connection, statements: Statements, applied: Applied) -> None:
    """Record the entries the history setting keeps, of the rows that were not moved
    into history with theirs."""
    setting = applied.history
    entries = [
        c.entry()
        for c in applied.completions
        if c.outcome is not None and not c.moves and keeps(setting, c.outcome)
    ]
    history_store.record(conn, statements, setting, entries)


def results(conn: Connection, statements: Statements, applied: Applied) -> None:
    """Keep the final outcomes of the tasks that keep results."""
    result_store.record(
        conn, statements, [c.result for c in applied.completions if c.result is not None]
    )


def groups(conn: Connection, statements: Statements, applied: Applied) -> None:
    """Count each group down by its members whose rows left the table."""
    finished: dict[int, int] = {}
    for c in applied.completions:
        group_id = c.execution.group_id
        if group_id is not None and c.leaves:
            finished[group_id] = finished.get(group_id, 0) + 1
    if finished:
        group_store.finished(conn, statements, finished, applied.now)


def notify(conn: Connection, statements: Statements, applied: Applied) -> None:
    """Wake the schedulers on commit for each limited task whose place was freed."""
    if applied.notify:
        freed = {c.execution.task_name for c in applied.completions}
        _notify(conn, statements.scheduling, freed & applied.notify)


#: The recorders, in the order ``record`` calls them (see the module's documentation).
RECORDERS: tuple[Recorder, ...] = (scheduled, plans, history, results, groups, notify)


def record(conn: Connection, statements: Statements, applied: Applied) -> None:
    """Let each recorder write its part of ``applied``, in order."""
    for recorder in RECORDERS:
        recorder(conn, statements, applied)
