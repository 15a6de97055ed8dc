"""An UPDATE whose rows the caller reads back, on a database with or without
``UPDATE ... RETURNING``.

Where the database has it (PostgreSQL, SQLite) that is one statement. MariaDB has
RETURNING for INSERT and DELETE only, so there the same change is three statements in the
caller's transaction: lock the rows by their key (``SELECT ... FOR UPDATE``, skipping rows
another transaction holds when the update would), update them by that key, and read them
back as updated. The lock keeps them as found until the transaction ends, so the three
act on the rows one statement would have.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Row,
    Select,
    Table,
    Update,
    bindparam,
    select,
    tuple_,
    update,
)

__all__ = ["Marking"]

#: The bound list of the locked rows' keys in ``mark`` and ``read``.
_MARKED = "marked"


@dataclass(frozen=True, slots=True)
class Marking:
    """``one`` (``UPDATE ... RETURNING``), or ``find``, ``mark`` and ``read``."""

    one: Update | None = None
    find: Select[Any] | None = None
    mark: Update | None = None
    read: Select[Any] | None = None

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
    ) -> Marking:
        """The update of ``values`` on the rows ``where`` selects, returning ``returning``.

        ``one_statement`` (``Backend.updates_return``) makes it one statement. Otherwise
        ``find`` (selecting the rows' keys, locked) stands for ``where`` when given, for a
        choice that needs an order and a limit; ``skip_locked`` skips rows that another
        transaction holds instead of waiting for them.
        """
        where = list(where)
        if one_statement:
            return cls(one=update(table).where(*where).values(values).returning(*returning))
        key = list(table.primary_key)
        if find is None:
            find = select(*key).where(*where).with_for_update(skip_locked=skip_locked)
        marked = tuple_(*key).in_(bindparam(_MARKED, expanding=True))
        return cls(
            find=find,
            mark=update(table).where(marked).values(values),
            read=select(*returning).where(marked),
        )

    def run(self, conn: Connection, params: Mapping[str, Any]) -> Sequence[Row[Any]]:
        """Run the update in ``conn``'s transaction with ``params``; the rows it changed, as
        changed."""
        if self.one is not None:
            return conn.execute(self.one, params).all()
        assert self.find is not None
        assert self.mark is not None
        assert self.read is not None
        keys = [tuple(row) for row in conn.execute(self.find, params)]
        if not keys:
            return []
        marked = {**params, _MARKED: keys}
        conn.execute(self.mark, marked)
        return conn.execute(self.read, marked).all()
