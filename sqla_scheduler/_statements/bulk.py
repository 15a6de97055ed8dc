"""The statements of the admin page's bulk actions: find what a filter selects that an
action can act on, then act on it a batch of keys at a time.

A bulk action locks the keys it found (``SELECT ... FOR UPDATE``: nothing changes them
until it commits) and changes them with one statement per batch of one task's instances,
an IN list of scalars (MariaDB plans an IN list of tuples in time quadratic in its
length; see ``Marking``). Each statement repeats the condition that the single action
checks, so a batch keeps the same invariants: a running execution is never changed, a
group's callback that waits for its members is never made due, a version moves with each
change.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Delete,
    Select,
    Table,
    Update,
    bindparam,
    delete,
    exists,
    func,
    literal,
    select,
    update,
)

from sqla_scheduler._dialects import Backend
from sqla_scheduler._execution import WAITING, ExecutionAction
from sqla_scheduler._history_entry import REQUEUEABLE
from sqla_scheduler._statements.shapes import Shapes
from sqla_scheduler.models import history_table

__all__ = ["Bulk", "bulk_for"]


class Bulk(Shapes):
    """Bulk retry, delete and cancel of executions, bulk requeue of dead letters."""

    def __init__(self, table: Table, backend: Backend) -> None:
        super().__init__(table, backend)
        c = table.c
        self.history = h = history_table(table)
        not_waiting = c.execution_time < literal(WAITING, c.execution_time.type)
        #: What each action can act on, beside the filter: what its single action checks.
        self.actionable: dict[ExecutionAction, tuple[ColumnElement[bool], ...]] = {
            # as the page's retry: an unpicked failing execution, not a waiting callback
            "retry": (self.unpicked, self.failing, not_waiting),
            # as the page's delete, but neither a group's member nor its callback: their
            # group's counts and chain move with them, which ``_store.cancel`` does one by one
            "delete": (self.unpicked, c.group_id.is_(None), c.awaits.is_(None)),
            # as the page's cancel of a running one: a stop not asked for yet
            "cancel": (self.picked, c.stop_requested_at.is_(None)),
        }
        in_batch = (
            c.task_name == bindparam("batch_task"),
            c.task_instance.in_(bindparam("batch_instances", expanding=True)),
        )
        #: Make the batch's executions due ``now`` (``batch_task``, ``batch_instances``).
        self.retry: Update = (
            update(table)
            .where(*in_batch, *self.actionable["retry"])
            .values(execution_time=self.time("now"), version=self.next_version())
        )
        #: Delete the batch's executions.
        self.delete: Delete = delete(table).where(*in_batch, *self.actionable["delete"])
        #: Ask the processes running the batch's executions to stop them (their stop
        #: request is ``now``); versions stay, as ``Scheduling.request_stop``'s do.
        self.stop: Update = (
            update(table)
            .where(*in_batch, *self.actionable["cancel"])
            .values(stop_requested_at=self.time("now"))
        )

        #: The dead letters a requeue would schedule again: the newest requeueable entry
        #: of each key that has no execution in the table (see ``dead_letters``).
        newer = history_table(table).alias("newer")
        self._requeueable: tuple[ColumnElement[bool], ...] = (
            h.c.outcome.in_(REQUEUEABLE),
            ~exists().where(c.task_name == h.c.task_name, c.task_instance == h.c.task_instance),
            ~exists().where(
                newer.c.task_name == h.c.task_name,
                newer.c.task_instance == h.c.task_instance,
                newer.c.outcome.in_(REQUEUEABLE),
                newer.c.id > h.c.id,
            ),
        )
        #: Schedule the entries ``ids`` again, due ``now``, each unless an execution with
        #: its key exists (as ``History.requeue`` does one); returns each inserted task
        #: name where ``Backend.inserts_return``, else its row count counts them.
        rows = select(
            h.c.task_name,
            h.c.task_instance,
            backend.text_json(h.c.task_data),
            self.time("now"),
            h.c.priority,
            h.c.payload_version,
        ).where(h.c.id.in_(bindparam("ids", expanding=True)), h.c.outcome.in_(REQUEUEABLE))
        into = ["task_name", "task_instance", "task_data", "execution_time", "priority"]
        self.requeue: Any = backend.returning_inserted(
            backend.insert_ignoring(table).from_select([*into, "payload_version"], rows),
            c.task_name,
        )

    def keys(
        self, action: ExecutionAction, where: Sequence[ColumnElement[bool]], limit: int
    ) -> Select[Any]:
        """The keys of up to ``limit`` executions that ``where`` selects and ``action`` can
        act on, in key order, locked until the transaction ends."""
        c = self.table.c
        return (
            select(c.task_name, c.task_instance)
            .where(*where, *self.actionable[action])
            .order_by(c.task_name, c.task_instance)
            .limit(limit)
            .with_for_update()
        )

    def count(self, action: ExecutionAction, where: Sequence[ColumnElement[bool]]) -> Select[Any]:
        """How many executions ``where`` selects that ``action`` can act on."""
        return select(func.count()).select_from(self.table).where(*where, *self.actionable[action])

    def dead_letters(self, where: Sequence[ColumnElement[bool]], limit: int) -> Select[Any]:
        """The ids of up to ``limit`` entries that ``where`` selects and that a requeue
        would schedule again, oldest first."""
        h = self.history
        return select(h.c.id).where(*where, *self._requeueable).order_by(h.c.id).limit(limit)

    def count_dead_letters(self, where: Sequence[ColumnElement[bool]]) -> Select[Any]:
        """How many entries ``dead_letters`` would find without a limit."""
        h = self.history
        return select(func.count()).select_from(h).where(*where, *self._requeueable)


@cache
def bulk_for(table: Table, backend: Backend) -> Bulk:
    """The cached ``Bulk`` statements for ``table`` on ``backend``."""
    return Bulk(table, backend)
