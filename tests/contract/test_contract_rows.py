"""A row as JSON (``raw_row_json``, and the history entry of a row no scheduler can load
that carries it), and rows from a JSON list (``json_rows``)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, select

from sqla_scheduler._statements.scheduling import JSON_ROW
from sqla_scheduler._statements.shapes import held_columns
from sqla_scheduler.models import BIGINT_MAX, history_table
from tests.contract._database import NOW, Database, databases, later, row

#: A row with every column set, each to a value its type can get wrong as text: beyond
#: ASCII and the BMP, quotes, a backslash, control characters, the largest version,
#: microseconds.
FULL = row(
    "tâche",
    "instance ☃ 🎉",
    NOW,
    task_data={"ü": ["é", "🎉"], "n": 2**53 + 1, "x": 2.5, "none": None},
    priority=-5,
    schedule="every 5s",
    trace_context={"traceparent": "00-ab-cd-01"},
    payload_version=2,
) | {
    "picked": True,
    "picked_by": "wörker",
    "last_heartbeat": later(1),
    "last_success": later(2),
    "last_failure": later(3),
    "consecutive_failures": 3,
    "version": BIGINT_MAX,
    "started_at": later(4),
    "last_error": 'said "hi" \\ then\nnew\tline\x01 é ☃ 🎉',
    "group_id": 2**40,
    "awaits": None,
}
_TIMESTAMPS = ("execution_time", "last_heartbeat", "last_success", "last_failure", "started_at")
_JSON = ("task_data", "trace_context")

#: For each database, a value of the row no scheduler can load (raw SQL), and what of it
#: the row's JSON shows.
UNLOADABLE = {
    # beyond Python's datetime (year 9999)
    "postgresql": ("UPDATE scheduled_tasks SET execution_time = '10000-01-01 00:00+00'", "10000"),
    # a blob in a timestamp column: dynamic typing
    "sqlite": ("UPDATE scheduled_tasks SET execution_time = X'00FF'", "X'00FF'"),
    # a payload that is not JSON, kept as text
    "mariadb": ("UPDATE scheduled_tasks SET task_data = '{not json'", "{not json"),
}


def _text(value: Any) -> str | None:
    """A value of the row's JSON as the text it stands for: SQLite's are SQL literals
    (``quote``: strings quoted, NULL spelt out)."""
    if value is None or value == "NULL":
        return None
    assert isinstance(value, str), value
    if len(value) > 1 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def _instant(text: str) -> datetime:
    """A timestamp's text, with a zone (``+00``) or without (UTC)."""
    if text[-3] in "+-" and text[-6] != ":":
        text += ":00"
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _row_json(db: Database, conn: Connection) -> dict[str, Any]:
    found = conn.scalar(select(db.backend.raw_row_json(db.table)))
    assert isinstance(found, str)
    decoded = json.loads(found)
    assert isinstance(decoded, dict)
    return decoded


def test_the_json_of_a_row_holds_every_column_as_text(database: Database) -> None:
    """``raw_row_json``: every column by name, its value as the database writes it, read
    back as the value written: timestamps to the microsecond, text as it was."""
    db = database
    db.put(FULL)
    with db.engine.connect() as conn:
        found = {name: _text(value) for name, value in _row_json(db, conn).items()}
    assert set(found) == {column.name for column in db.table.c}
    for name, value in FULL.items():
        text = found[name]
        if value is None:
            assert text is None, name
        elif name in _TIMESTAMPS:
            assert text is not None
            assert _instant(text) == value, name
        elif name in _JSON:
            assert text is not None
            assert json.loads(text) == value, name
        elif name == "picked":
            assert text in ("true", "1")
        else:
            assert text == str(value), name


def test_the_json_of_a_row_holds_values_no_scheduler_can_load(database: Database) -> None:
    db = database
    db.put(row("t", "a"))
    sql, shown = UNLOADABLE[db.name]
    db.raw(sql)
    with db.engine.connect() as conn:
        found = _row_json(db, conn)
    assert any(shown in str(value) for value in found.values()), found
    assert _text(found["task_name"]) == "t"


def _move_undecodable(db: Database, conn: Connection, instance: str) -> bool:
    """``History.move_undecodable`` (and ``remove_undecodable`` where a DELETE cannot feed an
    INSERT: ``Backend.move``): whether the row went into history."""
    history = db.statements.history
    params = {
        "key_task": "t",
        "key_instance": instance,
        "finished_at": NOW,
        "error": "cannot load: ",
    }
    if history.remove_undecodable is None:
        return conn.execute(history.move_undecodable, params).first() is not None
    if conn.execute(history.move_undecodable, params).rowcount == 0:
        return False
    conn.execute(history.remove_undecodable, params)
    return True


def test_a_row_no_scheduler_can_load_goes_into_history_with_its_json(database: Database) -> None:
    """What can be read goes into the entry's columns, every raw value after the error;
    a row that can be loaded stays where it is."""
    db = database
    db.put(
        row("t", "bad", trace_context=["not", "an object"], task_data={"ü": 1}, priority=3),
        row("t", "good"),
    )
    moved = db.run(
        lambda conn: (_move_undecodable(db, conn, "bad"), _move_undecodable(db, conn, "good"))
    )
    assert moved == (True, False)
    assert set(db.rows()) == {("t", "good")}
    with db.engine.connect() as conn:
        entry = conn.execute(select(history_table(db.table))).mappings().one()
    assert (entry["task_instance"], entry["outcome"], entry["priority"]) == (
        "bad",
        "undecodable",
        3,
    )
    assert json.loads(entry["task_data"]) == {"ü": 1}
    assert entry["error"].startswith("cannot load: {")
    raw = json.loads(entry["error"].removeprefix("cannot load: "))
    assert json.loads(_text(raw["trace_context"]) or "") == ["not", "an object"]


@databases(lambda backend: backend.json_rows is not None, "lists bind as arrays or IN lists")
def test_rows_from_a_json_list_keep_their_types_and_text(database: Database) -> None:
    """``json_rows``: the JSON array bound as one parameter, as rows with the columns'
    names and types; text compared as the table compares it (byte by byte: ``x`` is not
    ``X``)."""
    db = database
    c = db.table.c
    assert db.backend.json_rows is not None
    keys = db.backend.json_rows("keys", held_columns(c))
    given = [["a", "x", BIGINT_MAX], ["b", "é ☃ 🎉", 1]]
    with db.engine.connect() as conn:
        found = conn.execute(select(keys), {"keys": json.dumps(given)}).all()
        assert [list(r) for r in found] == given
        db.put(row("a", "x"), row("a", "X"))
        joined = select(c.task_instance).join_from(
            keys, db.table, c.task_instance == keys.c.task_instance
        )
        assert conn.scalars(joined, {"keys": json.dumps([["a", "x", 1]])}).all() == ["x"]
        rows = db.backend.json_rows("rows", [c[name] for name in JSON_ROW])
        values = ["t", "i", '{"ü": null}', "2024-05-06 07:08:09.123456", -2, None, None, 3]
        assert list(conn.execute(select(rows), {"rows": json.dumps([values])}).one()) == [
            *values[:3],
            NOW.replace(tzinfo=None),
            *values[4:],
        ]
