"""The history table's statements: record finished attempts, move an execution that leaves
the scheduler's table into history with its payload, list, requeue and prune."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Delete,
    Insert,
    Select,
    Table,
    Text,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    literal,
    null,
    select,
    true,
)

from sqla_scheduler._dialects import Backend, Move
from sqla_scheduler._history_entry import HISTORY_SORTS, REQUEUEABLE
from sqla_scheduler._statements.finding import Finding, HistoryFilter, order_by, where_found
from sqla_scheduler._statements.shapes import Shapes, count_where
from sqla_scheduler.models import history_table

__all__ = ["History"]


class History(Shapes):
    """Statements on ``table``'s history table (``Shapes`` describes ``table`` itself)."""

    def __init__(self, table: Table, backend: Backend) -> None:
        super().__init__(table, backend)
        h = history_table(table)
        self.history = h
        c = table.c
        #: Record finished attempts, each entry's values bound by column name.
        self.record: Insert = insert(h)
        # What a moved row's entry holds: the row's own columns, and bound values for what
        # the row does not know (how the attempt ended, and when).
        entry = {
            "outcome": bindparam("outcome", type_=h.c.outcome.type),
            "started_at": bindparam("started_at", type_=h.c.started_at.type),
            "finished_at": bindparam("finished_at", type_=h.c.finished_at.type),
            "attempt": bindparam("attempt", type_=h.c.attempt.type),
            "error": bindparam("error", type_=h.c.error.type),
        }
        moved = (
            "task_name",
            "task_instance",
            "execution_time",
            "picked_by",
            "priority",
            "payload_version",
        )
        into = [*moved, "task_data", *entry]
        held = (self.at_key, c.version == bindparam("seen_version"))
        #: Move the held execution at the bound key and ``seen_version`` into history,
        #: with the bound ``outcome``, times, ``attempt`` and ``error`` (``Backend.move``:
        #: in one statement it returns the entry's id; as a copy then ``remove_moved``, its
        #: row count says whether it copied).
        self.move: Any
        #: SQLite, MariaDB: delete the row ``move`` copied (PostgreSQL's ``move`` deletes it
        #: too).
        self.remove_moved: Delete | None
        taken = [*(c[name] for name in moved), backend.json_text(c.task_data).label("data")]
        self.move, self.remove_moved = backend.move(
            Move(table, h, into, where=held, taken=taken, given=list(entry.values()))
        )

        #: Take the row at the bound key out of the table into history as ``undecodable``
        #: when the scheduler cannot load it (see ``Shapes.readable``): what can be read
        #: goes into its columns, and the raw value of every column, as the database
        #: writes it, follows the bound ``error`` text. Returned and counted as ``move``.
        self.move_undecodable: Any
        #: SQLite: delete the row ``move_undecodable`` copied.
        self.remove_undecodable: Delete | None
        self._unreadable(table, backend)

        #: Schedule the payload of the requeueable entry ``history_id`` again, due at
        #: ``now``, as the version it was written with, unless an execution with its key
        #: exists; returns its task name where ``Backend.inserts_return`` (else its row
        #: count says whether it inserted).
        entry_row = select(
            h.c.task_name,
            h.c.task_instance,
            backend.text_json(h.c.task_data),
            bindparam("now", type_=c.execution_time.type),
            h.c.priority,
            h.c.payload_version,
        ).where(h.c.id == bindparam("history_id"), h.c.outcome.in_(REQUEUEABLE))
        into_table = ["task_name", "task_instance", "task_data", "execution_time", "priority"]
        self.requeue: Any = backend.returning_inserted(
            backend.insert_ignoring(table).from_select([*into_table, "payload_version"], entry_row),
            c.task_name,
        )

        #: Delete up to ``limit`` entries that finished before ``threshold``, oldest first.
        oldest = (
            select(h.c.id)
            .where(h.c.finished_at < bindparam("threshold", type_=h.c.finished_at.type))
            .order_by(h.c.finished_at)
            .limit(bindparam("limit"))
        )
        # through a derived table: MariaDB refuses a LIMIT in an IN subquery
        oldest_ids = select(oldest.subquery("oldest").c.id)
        self.prune: Delete = delete(h).where(h.c.id.in_(oldest_ids.scalar_subquery()))

        #: For each task name with entries that finished at or after the bound ``since``:
        #: how many of them succeeded and how many failed (read through the index on
        #: ``finished_at``: the cost is that of the entries since then, not of them all).
        self.outcome_counts: Select[Any] = (
            select(
                h.c.task_name,
                count_where(h.c.outcome == "succeeded").label("succeeded"),
                count_where(h.c.outcome == "failed").label("failed"),
            )
            .where(h.c.finished_at >= bindparam("since", type_=h.c.finished_at.type))
            .group_by(h.c.task_name)
        )
        #: For each task name with dead letters, how many (however old: they stay until
        #: pruned). The outcomes are written into the SQL, as the partial index
        #: ``ix_<table>_history_dead_letters`` has them, so that every database uses it.
        dead: BindParameter[Any] = bindparam(
            "dead", REQUEUEABLE, expanding=True, literal_execute=True
        )
        self.dead_letter_counts: Select[Any] = (
            select(h.c.task_name, func.count().label("dead_letters"))
            .where(h.c.outcome.in_(dead))
            .group_by(h.c.task_name)
        )

    def _unreadable(self, table: Table, backend: Backend) -> None:
        h = self.history
        c = table.c
        bad = (self.at_key, self.loadable.is_not(true()))

        def readable(name: str, value: ColumnElement[Any], default: Any = None) -> Any:
            check = self.readable.get(name)
            return value if check is None else case((check, value), else_=default)

        raw = backend.raw_row_json(table)
        values = {
            "task_name": cast(c.task_name, Text),
            "task_instance": cast(c.task_instance, Text),
            "outcome": literal("undecodable"),
            "execution_time": readable("execution_time", c.execution_time),
            "finished_at": bindparam("finished_at", type_=h.c.finished_at.type),
            "picked_by": readable("picked_by", c.picked_by),
            "attempt": literal(1),
            "error": bindparam("error", type_=Text) + raw,
            "task_data": readable("task_data", backend.json_text(c.task_data)),
            "priority": readable("priority", c.priority, 0),
            "payload_version": readable("payload_version", c.payload_version, 1),
        }
        taken = [value.label(name) for name, value in values.items()]
        self.move_undecodable, self.remove_undecodable = backend.move(
            Move(table, h, list(values), where=bad, taken=taken)
        )

    def listing(self, chosen: HistoryFilter, *, history_id: int | None = None) -> Select[Any]:
        """The entries ``chosen`` selects (or the one numbered ``history_id``), newest first
        or in the order its ``finding`` sorts by (no limit; the caller adds one)."""
        h = self.history
        where = self.where(chosen, history_id=history_id)
        return select(h).where(*where).order_by(*_history_order(h.c, chosen.finding))

    def where(
        self, chosen: HistoryFilter, *, history_id: int | None = None
    ) -> list[ColumnElement[bool]]:
        """The WHERE clauses of ``listing`` (and of a bulk action on what it selects):
        ``instance_contains`` keeps the entries whose instance id contains that text,
        ``finding`` those whose error contains its text and that finished in its range."""
        h = self.history
        where: list[ColumnElement[bool]] = []
        if history_id is not None:
            where.append(h.c.id == history_id)
        if chosen.task is not None:
            where.append(h.c.task_name == chosen.task)
        if chosen.instance is not None:
            where.append(h.c.task_instance == chosen.instance)
        if chosen.outcomes is not None:
            where.append(h.c.outcome.in_(chosen.outcomes))
        if chosen.since is not None:
            where.append(h.c.finished_at >= chosen.since)
        if chosen.instance_contains:
            where.append(h.c.task_instance.contains(chosen.instance_contains, autoescape=True))
        return where + where_found(chosen.finding, error=h.c.error, time=h.c.finished_at)

    def previews(
        self, chosen: HistoryFilter, *, limit: int, offset: int, preview: int
    ) -> Select[Any]:
        """One page of ``listing`` without the payloads and errors: ``task_data`` and
        ``error`` are ``NULL``, and ``task_data_preview`` and ``error_preview`` hold the
        first ``preview`` characters of each, so a page costs the same whatever they weigh.
        """
        # Cut from the page's rows only, not from every row the OFFSET skips.
        page = self.listing(chosen).limit(limit).offset(offset or None).subquery("page")
        cut = ("task_data", "error")
        return select(
            *(null().label(col.name) if col.name in cut else col for col in page.c),
            *(func.substr(page.c[name], 1, preview).label(f"{name}_preview") for name in cut),
        ).order_by(*_history_order(page.c, chosen.finding))


def _history_order(c: Any, finding: Finding) -> list[Any]:
    """A history listing's order over the columns ``c``: newest first by default."""
    return order_by(finding, c, HISTORY_SORTS, [c.id.desc()], ("id",))
