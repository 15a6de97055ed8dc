"""An UPDATE or a DELETE whose rows the caller reads back, on a database with or without
``UPDATE ... RETURNING``.

Where the database has it (PostgreSQL, SQLite) that is one statement. MariaDB has
RETURNING for INSERT and DELETE only, and none for a DELETE that joins another table;
MySQL has none at all. There the same change is up to three statements in the caller's
transaction: lock the
rows by their key (``SELECT ... FOR UPDATE``, skipping rows another transaction holds
when the update would), update (or delete) them by that key, and read them back as
updated. The lock keeps them as found until the transaction ends, so the statements act on
the rows one statement would have.

The keys go from the first statement to the others as an IN list of tuples, or, on
MariaDB (``Backend.json_rows``), one task's instances at a time as an IN list of scalars:
MariaDB plans an IN list of tuples in time quadratic in its length, and a join with the
keys as rows may read a small table first, locking every row it reads. There a ``find``
that joins the keys as rows (``Shapes.held_keys``) reads them first (``STRAIGHT_JOIN``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    Column,
    ColumnElement,
    Connection,
    Delete,
    Row,
    Select,
    Table,
    Update,
    bindparam,
    delete,
    select,
    tuple_,
    update,
)

__all__ = ["Marking"]

#: The bound list of the locked rows' keys in ``mark`` and ``read``: tuples, or one task's
#: name and instances.
_MARKED = "marked"
_NAME = "marked_name"
_INSTANCES = "marked_instances"

JSONRows = Callable[[str, Sequence[Column[Any]]], Any]


@dataclass(frozen=True, slots=True)
class Marking:
    """``one`` (``UPDATE``/``DELETE ... RETURNING``), or ``find``, ``mark`` and ``read``
    (for a DELETE, none when the keys found are all it returns)."""

    one: Update | Delete | None = None
    find: Select[Any] | None = None
    mark: Update | Delete | None = None
    read: Select[Any] | None = None
    #: ``read`` runs before ``mark``: a removal reads the rows it is about to delete.
    read_first: bool = False
    #: Whether ``mark`` and ``read`` run once for each task name among the keys, with its
    #: instances as a list of scalars.
    by_task: bool = False

    @classmethod
    def build(
        cls,
        table: Table,
        *,
        one_statement: bool,
        where: Iterable[ColumnElement[bool]],
        values: Mapping[str, Any],
        returning: Sequence[ColumnElement[Any]],
        find: Select[Any] | None = None,
        skip_locked: bool = False,
        json_rows: JSONRows | None = None,
    ) -> Marking:
        """The update of ``values`` on the rows ``where`` selects, returning ``returning``.

        ``one_statement`` (``Backend.updates_return``) makes it one statement. Otherwise
        ``find`` (selecting the rows' keys, locked) stands for ``where`` when given, for a
        choice that needs an order and a limit; ``skip_locked`` skips rows that another
        transaction holds instead of waiting for them; ``json_rows``
        (``Backend.json_rows``) binds the keys found as JSON.
        """
        where = list(where)
        if one_statement:
            return cls(one=update(table).where(*where).values(values).returning(*returning))
        marked = _marked(table, by_task=json_rows is not None)
        return cls(
            find=find if find is not None else _find(table, where, skip_locked, json_rows),
            mark=update(table).where(*marked).values(values),
            read=select(*returning).where(*marked),
            by_task=json_rows is not None,
        )

    @classmethod
    def removal(
        cls,
        table: Table,
        *,
        one_statement: bool,
        where: Iterable[ColumnElement[bool]],
        returning: Sequence[ColumnElement[Any]] = (),
        json_rows: JSONRows | None = None,
    ) -> Marking:
        """The deletion of the rows ``where`` selects, returning ``returning`` (default
        their keys): one ``DELETE ... RETURNING`` where ``one_statement``, else the rows
        locked, read, then deleted by their keys (a DELETE that joins the keys has no
        RETURNING, and MySQL none at all)."""
        where = list(where)
        if one_statement:
            return cls(one=delete(table).where(*where).returning(*returning or table.primary_key))
        marked = _marked(table, by_task=json_rows is not None)
        return cls(
            find=_find(table, where, False, json_rows),
            mark=delete(table).where(*marked),
            read=select(*returning).where(*marked) if returning else None,
            read_first=True,
            by_task=json_rows is not None,
        )

    def run(self, conn: Connection, params: Mapping[str, Any]) -> Sequence[Row[Any]]:
        """Run the change in ``conn``'s transaction with ``params``; the rows it changed, as
        changed (a removal's: their keys)."""
        if self.one is not None:
            return conn.execute(self.one, params).all()
        assert self.find is not None
        assert self.mark is not None
        found = conn.execute(self.find, params).all()
        if not found:
            return []
        if self.by_task:
            instances: dict[str, list[str]] = {}
            for name, instance in found:
                instances.setdefault(name, []).append(instance)
            batches = [
                {**params, _NAME: name, _INSTANCES: each} for name, each in instances.items()
            ]
        else:
            batches = [{**params, _MARKED: [tuple(row) for row in found]}]
        changed: list[Row[Any]] = []
        for marked in batches:
            if self.read is not None and self.read_first:
                changed += conn.execute(self.read, marked).all()
            conn.execute(self.mark, marked)
            if self.read is not None and not self.read_first:
                changed += conn.execute(self.read, marked).all()
        return found if self.read is None else changed


def _find(
    table: Table, where: list[ColumnElement[bool]], skip_locked: bool, json_rows: JSONRows | None
) -> Select[Any]:
    """The keys of the rows ``where`` selects, locked. Where the keys a statement is given
    are rows to join (``json_rows``), those rows are read first, and the table by its key
    for each: read first, or scanned into a join buffer, a small table would have every
    row of it locked."""
    find = select(*table.primary_key).where(*where)
    if json_rows is not None:
        given = [f for f in find.get_final_froms() if f is not table]
        find = (
            find.select_from(*given, table)
            .prefix_with("STRAIGHT_JOIN")
            .with_hint(table, "FORCE INDEX (PRIMARY)")
        )
    return find.with_for_update(skip_locked=skip_locked)


def _marked(table: Table, *, by_task: bool) -> tuple[ColumnElement[bool], ...]:
    """The rows whose keys are bound: as ``marked``, a list of tuples; ``by_task``, one task
    name ``marked_name`` and a list of its instances ``marked_instances``."""
    key = list(table.primary_key)
    if not by_task:
        return (tuple_(*key).in_(bindparam(_MARKED, expanding=True)),)
    name, instance = key
    return name == bindparam(_NAME), instance.in_(bindparam(_INSTANCES, expanding=True))
