"""The SQL each database writes its own way: one function per operation and database.

A ``Backend`` names one of these for each operation (``backends``), and the statement
builders call the operation without asking which database they build for: insert
ignoring existing keys, upsert, a list bound as one parameter, the rows of bound keys, a
row's address, a JSON column as text and back, a row as JSON, a task's turn, a row moved
into another table, an UPDATE or INSERT that returns what it changed, and NOTIFY.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    BigInteger,
    BindParameter,
    Column,
    Delete,
    Insert,
    Select,
    String,
    Table,
    Text,
    any_,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    literal,
    literal_column,
    select,
    true,
    tuple_,
    type_coerce,
)
from sqlalchemy.dialects import mysql, postgresql, sqlite
from sqlalchemy.sql.elements import ColumnClause, ColumnElement, Label
from sqlalchemy.sql.expression import Executable
from sqlalchemy.types import TypeEngine

__all__ = [
    "HeldKey",
    "Move",
    "Moving",
    "Notify",
    "Overwrite",
    "RowsFromJSON",
    "any_of_array",
    "any_of_subquery",
    "array_param",
    "cast_jsonb",
    "cast_text",
    "coerce_text",
    "copy_then_delete",
    "delete_into_insert",
    "in_list",
    "in_subquery",
    "insert_ignore",
    "json_table",
    "jsonb_to_recordset",
    "keys_as_arrays",
    "keys_as_json",
    "keys_as_tuples",
    "keys_in_arrays",
    "keys_in_json",
    "keys_in_tuples",
    "lock_advisory",
    "lock_none",
    "lock_record_row",
    "no_condition",
    "on_conflict_update",
    "on_duplicate_key_update",
    "pg_notify",
    "raw_row_json_object",
    "raw_row_json_text",
    "raw_row_quoted",
    "skip_conflicts",
    "synchronous_commit_off",
]

#: The values an upsert writes over an existing row, given the columns of the row it
#: would have inserted (``excluded``), by column name.
Overwrite = Callable[[Any], dict[str, Any]]
#: ``notify(channel, payload)``: the NOTIFY of ``payload`` on ``channel``, as a value.
Notify = Callable[[ColumnElement[Any], ColumnElement[Any]], ColumnElement[Any]]
#: ``rows_from_json(rows, columns, name)``: the JSON array of objects bound as ``rows``
#: as a table ``name`` with ``columns``.
RowsFromJSON = Callable[[BindParameter[Any], Sequence[ColumnClause[Any]], str], Any]
#: A row moved into another table: the INSERT, and the DELETE to run after it in the
#: same transaction (``None`` when the INSERT deletes the row itself).
Moving = tuple[Any, Delete | None]


@dataclass(frozen=True)
class Move:
    """The row of ``source`` that ``where`` selects, to move into ``target``'s columns
    ``into``, written from the values ``taken`` from the row (labelled as a statement
    that returns them names them), then those ``given``."""

    source: Table
    target: Table
    into: Sequence[str]
    where: Sequence[ColumnElement[bool]]
    taken: Sequence[ColumnElement[Any]]
    given: Sequence[ColumnElement[Any]] = ()


# A row as JSON.


def _raw_pairs(table: Table, as_text: Callable[[Any], Any]) -> list[Any]:
    """``name, value as text`` for each column, for a JSON object of the raw row."""
    pairs: list[Any] = []
    for column in table.c:
        pairs += [cast(literal(column.name), Text), as_text(type_coerce(column, Text))]
    return pairs


def raw_row_json_object(table: Table) -> ColumnElement[Any]:
    """PostgreSQL: ``json_build_object`` of the columns' text."""
    pairs = _raw_pairs(table, lambda value: cast(value, Text))
    return cast(func.json_build_object(*pairs), Text)


def raw_row_json_text(table: Table) -> ColumnElement[Any]:
    """MariaDB: ``json_object`` of the columns' text."""
    return func.json_object(*_raw_pairs(table, lambda value: cast(value, Text)))


def raw_row_quoted(table: Table) -> ColumnElement[Any]:
    """SQLite: ``json_object`` of the columns as SQL literals: ``quote()`` writes any
    value, a blob too."""
    return func.json_object(*_raw_pairs(table, func.quote))


# JSON columns as text, and text as a JSON column.


def cast_text(value: ColumnElement[Any]) -> ColumnElement[Any]:
    """PostgreSQL: ``jsonb`` read as its text (a CAST)."""
    return cast(value, Text)


def coerce_text(value: ColumnElement[Any]) -> ColumnElement[Any]:
    """JSON kept as text already (SQLite, MariaDB): the value as it is, typed as text."""
    return type_coerce(value, Text)


def cast_jsonb(text: ColumnElement[Any]) -> ColumnElement[Any]:
    """PostgreSQL: JSON text as ``jsonb``."""
    return cast(text, postgresql.JSONB)


# Inserts that skip or update an existing key.


def skip_conflicts(insert: Callable[[Table], Any]) -> Callable[[Table], Insert]:
    """PostgreSQL, SQLite: the dialect's INSERT with ``ON CONFLICT DO NOTHING``."""

    def insert_ignoring(table: Table) -> Insert:
        ignoring: Insert = insert(table).on_conflict_do_nothing()
        return ignoring

    return insert_ignoring


def insert_ignore(table: Table) -> Insert:
    """MariaDB: ``INSERT IGNORE``, which returns the rows inserted only."""
    return mysql.insert(table).prefix_with("IGNORE")


def on_conflict_update(
    insert: Insert, overwrite: Overwrite, where: ColumnElement[bool] | None
) -> Insert:
    """PostgreSQL, SQLite: ``ON CONFLICT (key) DO UPDATE ... WHERE``."""
    assert isinstance(insert, (postgresql.Insert, sqlite.Insert))
    key = list(insert.table.primary_key)
    updating: Insert = insert.on_conflict_do_update(
        index_elements=key, set_=overwrite(insert.excluded), where=where
    )
    return updating


def on_duplicate_key_update(
    insert: Insert, overwrite: Overwrite, where: ColumnElement[bool] | None
) -> Insert:
    """MariaDB: ``ON DUPLICATE KEY UPDATE``, each value kept as it was unless ``where``
    holds (there is no WHERE there)."""
    assert isinstance(insert, mysql.Insert)
    values = overwrite(insert.inserted)
    if where is not None:
        table = insert.table
        values = {name: case((where, value), else_=table.c[name]) for name, value in values.items()}
    updating: Insert = insert.on_duplicate_key_update(list(values.items()))
    return updating


# Lists bound as one parameter, and the rows of bound keys.


def array_param(name: str, item: TypeEngine[Any]) -> BindParameter[Any]:
    """PostgreSQL: the list bound as ``name``, one array parameter."""
    return bindparam(name, type_=postgresql.ARRAY(item))


def any_of_array(column: ColumnElement[Any], name: str, item: TypeEngine[Any]) -> Any:
    """PostgreSQL: ``column = ANY(:name)``, one statement text whatever the list's length
    (so it can be prepared)."""
    return column == any_(array_param(name, item))


def in_list(column: ColumnElement[Any], name: str, item: TypeEngine[Any]) -> Any:
    """``column IN (...)``, the list bound as ``name`` expanding."""
    return column.in_(bindparam(name, expanding=True))


def any_of_subquery(row: ColumnElement[Any], rows: Select[Any]) -> ColumnElement[bool]:
    """PostgreSQL: ``row = ANY(ARRAY(subquery))``: the subquery runs once and each
    address is a TID scan; ``IN (subquery)`` may become a join."""
    return row == any_(func.array(rows.scalar_subquery()))


def in_subquery(row: ColumnElement[Any], rows: Select[Any]) -> ColumnElement[bool]:
    """``row IN (subquery)``."""
    return row.in_(rows.scalar_subquery())


def json_table(name: str, columns: Sequence[Column[Any]]) -> Any:
    """MariaDB's ``JSON_TABLE`` over the JSON array bound as ``name``: text columns in the
    tables' own character set and collation, so that joins compare like with like."""
    specs = []
    for i, column in enumerate(columns):
        kind = column.type.compile(dialect=mysql.dialect())
        if kind == "JSON":  # as text: a JSON column reads JSON null as 'null', a string quoted
            kind = "LONGTEXT"
        if kind.startswith("VARCHAR") or kind.endswith("TEXT"):
            kind += " CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
        specs.append(f"{column.name} {kind} PATH '$[{i}]'")
    rows: ColumnElement[Any] = literal_column(f"'$[*]' COLUMNS ({', '.join(specs)})")
    return func.json_table(bindparam(name, type_=Text()), rows).table_valued(
        *(column.name for column in columns), name=name
    )


def jsonb_to_recordset(
    rows: BindParameter[Any], columns: Sequence[ColumnClause[Any]], name: str
) -> Any:
    """PostgreSQL: the JSON array of objects bound as ``rows`` as a table ``name`` with
    ``columns``, each of its type (a key missing from an object is NULL)."""
    return (
        func.jsonb_to_recordset(rows)
        .table_valued(*columns, name=name)
        .render_derived(with_types=True)
    )


def keys_as_arrays(columns: Sequence[Column[Any]]) -> tuple[ColumnElement[bool], ...]:
    """PostgreSQL: the held keys as the parallel arrays ``names``, ``instances`` and
    ``versions``, joined as rows (``unnest``)."""
    keys = (
        func.unnest(
            array_param("names", String()),
            array_param("instances", String()),
            array_param("versions", BigInteger()),
        )
        .table_valued("name", "instance", "version", name="held")
        .render_derived()
    )
    return tuple(column == key for column, key in zip(columns, keys.c, strict=True))


def keys_as_json(columns: Sequence[Column[Any]]) -> tuple[ColumnElement[bool], ...]:
    """MariaDB: the held keys as one JSON array of arrays ``keys``, joined as rows."""
    held = json_table("keys", columns)
    return tuple(column == held.c[column.name] for column in columns)


def keys_as_tuples(columns: Sequence[Column[Any]]) -> tuple[ColumnElement[bool], ...]:
    """SQLite: the held keys as one expanding IN list of tuples ``keys``."""
    return (tuple_(*columns).in_(bindparam("keys", expanding=True)),)


#: A held execution's key: its task name, instance id and the version held.
HeldKey = tuple[str, str, int]


def keys_in_arrays(keys: Sequence[HeldKey]) -> dict[str, Any]:
    """PostgreSQL: ``keys`` bound as ``keys_as_arrays`` takes them, three parallel arrays."""
    return {
        "names": [name for name, _, _ in keys],
        "instances": [instance for _, instance, _ in keys],
        "versions": [version for _, _, version in keys],
    }


def keys_in_json(keys: Sequence[HeldKey]) -> dict[str, Any]:
    """MariaDB: ``keys`` bound as ``keys_as_json`` takes them, one JSON array of arrays."""
    return {"keys": json.dumps([list(key) for key in keys])}


def keys_in_tuples(keys: Sequence[HeldKey]) -> dict[str, Any]:
    """SQLite: ``keys`` bound as ``keys_as_tuples`` takes them, a list of tuples."""
    return {"keys": list(keys)}


# A task's turn.


def lock_advisory(record: Table) -> Executable | None:
    """PostgreSQL: a transaction-scoped advisory lock of the bound ``lock_key``."""
    return select(func.pg_advisory_xact_lock(bindparam("lock_key", type_=BigInteger())))


def lock_none(record: Table) -> Executable | None:
    """SQLite: nothing to take, its writers take turns."""
    return None


def lock_record_row(record: Table) -> Executable | None:
    """MariaDB: a lock on the row of the tables' migration record ``record``."""
    return select(record.c.step).with_for_update()


# A row moved into another table.


def delete_into_insert(move: Move) -> Moving:
    """PostgreSQL: one statement, the row deleted and its new row written from what was
    deleted (a data-modifying CTE); returns the new row's id (a row count of an INSERT
    fed by such a CTE is not reliable across drivers)."""
    gone = delete(move.source).where(*move.where).returning(*move.taken).cte("gone")
    rows = select(*gone.c, *move.given)
    return insert(move.target).from_select(move.into, rows).returning(move.target.c.id), None


def copy_then_delete(move: Move) -> Moving:
    """SQLite, MariaDB: two statements in one transaction, the row copied (locked on
    MariaDB; SQLite's writer holds the whole database) then deleted; the copy's row count
    says whether it copied (MySQL has no RETURNING)."""
    values = [value.element if isinstance(value, Label) else value for value in move.taken]
    rows = select(*values, *move.given).where(*move.where).with_for_update()
    return insert(move.target).from_select(move.into, rows), delete(move.source).where(*move.where)


# Committing without waiting for the disk.


def synchronous_commit_off() -> tuple[ColumnElement[bool], ...]:
    """PostgreSQL: a condition that is always true and makes the statement's own
    transaction commit without waiting for its WAL to reach disk (``synchronous_commit``
    off, for that transaction only: evaluated once, before any row).

    For the pick (and the stamps): a pick lost to a server crash leaves its executions
    unpicked, to be picked again, which is what reviving them after the crash would do;
    the next commit that waits (the outcome's) makes the pick durable with it. The wait
    is a flush of the log, most of a millisecond on a small machine's disk, between a
    NOTIFY and the start of the work.
    """
    setting = func.set_config(literal("synchronous_commit"), literal("off"), true())
    return (select(setting).scalar_subquery() == literal("off"),)


def no_condition() -> tuple[ColumnElement[bool], ...]:
    """Commits wait for the disk as they always do: no condition."""
    return ()


# NOTIFY.


def pg_notify(channel: ColumnElement[Any], payload: ColumnElement[Any]) -> ColumnElement[Any]:
    """PostgreSQL: ``pg_notify(channel, payload)``, sent when the transaction commits."""
    return func.pg_notify(channel, payload)
