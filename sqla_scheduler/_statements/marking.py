"""An UPDATE or a DELETE whose rows the caller reads back, on a database with or without
``UPDATE ... RETURNING``.

Where the database has it (PostgreSQL, SQLite) that is one statement. MariaDB has
RETURNING for INSERT and DELETE only, and none for a DELETE that joins another table, so
there the same change is up to three statements in the caller's transaction: lock the
rows by their key (``SELECT ... FOR UPDATE``, skipping rows another transaction holds
when the update would), update (or delete) them by that key, and read them back as
updated. The lock keeps them as found until the transaction ends, so the statements act on
the rows one statement would have.

The keys go from the first statement to the others as one JSON parameter joined as rows
(``Backend.json_rows``), or as an IN list of tuples.
"""

from __future__ import annotations

import json
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

#: The bound list of the locked rows' keys in ``mark`` and ``read``.
_MARKED = "marked"

JSONRows = Callable[[str, Sequence[Column[Any]]], Any]


@dataclass(frozen=True, slots=True)
class Marking:
    """``one`` (``UPDATE``/``DELETE ... RETURNING``), or ``find``, ``mark`` and ``read``
    (none for a DELETE: the rows found are the rows deleted)."""

    one: Update | Delete | None = None
    find: Select[Any] | None = None
    mark: Update | Delete | None = None
    read: Select[Any] | None = None
    #: Whether the keys are bound to ``mark`` and ``read`` as one JSON array.
    keys_as_json: bool = False

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
        marked = _marked(table, json_rows)
        return cls(
            find=find if find is not None else _find(table, where, skip_locked),
            mark=update(table).where(*marked).values(values),
            read=select(*returning).where(*marked),
            keys_as_json=json_rows is not None,
        )

    @classmethod
    def removal(
        cls,
        table: Table,
        *,
        one_statement: bool,
        where: Iterable[ColumnElement[bool]],
        json_rows: JSONRows | None = None,
    ) -> Marking:
        """The deletion of the rows ``where`` selects, returning their keys: one
        ``DELETE ... RETURNING`` where ``one_statement``, else the rows locked, then
        deleted by their keys (a DELETE that joins the keys has no RETURNING)."""
        where = list(where)
        if one_statement:
            return cls(one=delete(table).where(*where).returning(*table.primary_key))
        return cls(
            find=_find(table, where, skip_locked=False),
            mark=delete(table).where(*_marked(table, json_rows)),
            keys_as_json=json_rows is not None,
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
        keys = [tuple(row) for row in found]
        marked = {**params, _MARKED: json.dumps(keys) if self.keys_as_json else keys}
        conn.execute(self.mark, marked)
        if self.read is None:
            return found
        return conn.execute(self.read, marked).all()


def _find(table: Table, where: list[ColumnElement[bool]], skip_locked: bool) -> Select[Any]:
    return select(*table.primary_key).where(*where).with_for_update(skip_locked=skip_locked)


def _marked(table: Table, json_rows: JSONRows | None) -> tuple[ColumnElement[bool], ...]:
    """The rows whose keys are bound as ``marked``."""
    key = list(table.primary_key)
    if json_rows is None:
        return (tuple_(*key).in_(bindparam(_MARKED, expanding=True)),)
    rows = json_rows(_MARKED, key)
    return tuple(column == rows.c[column.name] for column in key)
