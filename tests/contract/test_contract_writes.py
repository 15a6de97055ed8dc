"""The writes that differ by database: ``insert``, ``insert_ignoring``, ``upsert``, the
scheduling inserts built on them (one execution, a batch, a recurring task's row), and
timestamps kept without a zone where ``naive_timestamps``."""

from __future__ import annotations

import json
from datetime import timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Connection, false, func, literal_column, select
from sqlalchemy.exc import IntegrityError

from sqla_scheduler._dialects import read_notice
from sqla_scheduler._execution import Execution
from sqla_scheduler.models import STATS_COLUMNS, nodes_table, stats_table
from tests.contract._database import NOW, Database, databases, later, row

#: A payload with what JSON storage can get wrong: text beyond ASCII and the BMP,
#: nesting, a float, a big integer, a JSON null.
PAYLOAD = {"ü": ["é", "☃", "🎉"], "nested": {"n": 2**53 + 1, "x": 2.5, "none": None}}


def _inserted(db: Database, result: Any) -> int:
    """How many rows an INSERT of the scheduler's reports inserting: the rows it returns
    where ``inserts_return``, else its row count."""
    return len(result.all()) if db.backend.inserts_return else int(result.rowcount)


def test_insert_writes_a_row_and_refuses_an_existing_key(database: Database) -> None:
    db = database
    statement = db.backend.insert(db.table)
    with db.engine.begin() as conn:
        conn.execute(statement, row("t", "a", priority=3))
    with pytest.raises(IntegrityError), db.engine.begin() as conn:
        conn.execute(statement, row("t", "a", priority=4))
    assert db.one("t", "a")["priority"] == 3


def test_insert_ignoring_skips_existing_keys_and_inserts_the_rest(database: Database) -> None:
    """What ``Scheduling.insert`` is: a batch of executions, the existing ones left as
    they are, and the new ones reported (returned, or counted: ``inserts_return``)."""
    db = database
    db.put(row("t", "a", priority=5))
    batch = [row("t", "a", priority=1), row("t", "b", later(1)), row("u", "c", later(2))]
    with db.engine.begin() as conn:
        result = conn.execute(db.statements.scheduling.insert, batch)
        if db.backend.inserts_return:
            assert sorted(result.all()) == [("t", later(1)), ("u", later(2))]
        else:
            assert result.rowcount == 2
    rows = db.rows()
    assert set(rows) == {("t", "a"), ("t", "b"), ("u", "c")}
    assert rows["t", "a"]["priority"] == 5
    assert rows["t", "a"]["version"] == 1


def test_insert_ignoring_reports_none_when_every_key_exists_or_repeats(
    database: Database,
) -> None:
    db = database
    db.put(row("t", "a"))
    with db.engine.begin() as conn:
        none = conn.execute(db.statements.scheduling.insert, [row("t", "a", priority=2)])
        assert _inserted(db, none) == 0
        # one key twice in a batch: the first is inserted, the second skipped
        twice = conn.execute(
            db.statements.scheduling.insert, [row("t", "b", priority=1), row("t", "b", priority=2)]
        )
        assert _inserted(db, twice) == 1
    assert db.one("t", "b")["priority"] == 1
    assert db.one("t", "a")["priority"] == 0


@databases(
    xfail={
        "mariadb": "MariaDB's INSERT IGNORE makes every error a warning: the NULL time is "
        "stored as 0000-00-00 (and a key too long is cut to the column's length) instead "
        "of failing; latent while the scheduler checks its values before inserting",
    }
)
def test_insert_ignoring_skips_only_existing_keys(database: Database) -> None:
    """A row the table refuses for another reason (a NULL where none may be) is not
    skipped: the statement fails, as a plain INSERT would."""
    db = database
    with pytest.raises(IntegrityError), db.engine.begin() as conn:
        conn.execute(db.backend.insert_ignoring(db.table), [row("t", "a", execution_time=None)])
    assert db.rows() == {}


def test_upsert_inserts_a_missing_row(database: Database) -> None:
    db = database
    c = db.table.c
    upsert = db.backend.upsert(
        db.backend.insert(db.table).values(row("t", "a", priority=7)),
        lambda excluded: {"priority": excluded.priority},
        c.picked == false(),
    )
    with db.engine.begin() as conn:
        conn.execute(upsert)
    assert db.one("t", "a")["priority"] == 7


def test_upsert_overwrites_only_where_its_condition_holds(database: Database) -> None:
    """The overwrite reads the existing row (``version + 1``) and the row it would have
    inserted (``excluded``); a row where the condition fails is left as it was."""
    db = database
    c = db.table.c
    db.put(row("t", "free", priority=1), row("t", "held", priority=1, picked=True, version=5))

    def overwrite(excluded: Any) -> dict[str, Any]:
        return {"priority": excluded.priority, "version": c.version + 1}

    with db.engine.begin() as conn:
        for instance in ("free", "held"):
            insert = db.backend.insert(db.table).values(row("t", instance, priority=9))
            conn.execute(db.backend.upsert(insert, overwrite, c.picked == false()))
    rows = db.rows()
    assert (rows["t", "free"]["priority"], rows["t", "free"]["version"]) == (9, 2)
    assert (rows["t", "held"]["priority"], rows["t", "held"]["version"]) == (1, 5)


def test_upsert_without_a_condition_always_overwrites(database: Database) -> None:
    """``Nodes.record``: a scheduler's start and each of its beats are one statement."""
    db = database
    record = db.statements.nodes.record
    node = {
        "name": "n1",
        "host": "h",
        "pid": 1,
        "started_at": NOW,
        "last_seen": NOW,
        "concurrency": 4,
        "running": 0,
        "version": "1",
        "heartbeat_interval_ms": 1000,
    }
    with db.engine.begin() as conn:
        conn.execute(record, node)
        conn.execute(record, {**node, "pid": 2, "last_seen": later(5), "running": 3})
        found = conn.execute(select(nodes_table(db.table))).mappings().all()
    assert [(r["pid"], r["last_seen"], r["running"]) for r in found] == [(2, later(5), 3)]


def test_upsert_values_can_add_to_the_existing_row(database: Database) -> None:
    """``Stats.add``: a process's counts added to its row of the minute."""
    db = database
    counts = dict.fromkeys(STATS_COLUMNS, 1) | {"lag_ms": 10, "duration_ms": 20}
    key = {"minute": 28_000_000, "task_name": "t", "node": "n1", "outcome": "succeeded"}
    with db.engine.begin() as conn:
        conn.execute(db.statements.stats.add, {**key, **counts})
        conn.execute(db.statements.stats.add, {**key, **counts, "executions": 2})
        found = conn.execute(select(stats_table(db.table))).mappings().one()
    assert (found["executions"], found["lag_ms"], found["duration_ms"]) == (3, 20, 40)
    assert found["lag_0"] == 2


def _register(conn: Connection, db: Database, at: Any, schedule: str, deterministic: bool) -> None:
    conn.execute(
        db.statements.scheduling.upsert_recurring,
        {
            **row("r", "recurring", at, schedule=schedule, priority=2),
            "deterministic": deterministic,
        },
    )


def test_a_recurring_tasks_row_moves_only_when_a_deterministic_schedule_changed(
    database: Database,
) -> None:
    """``Scheduling.upsert_recurring``: its time is compared with the schedule before the
    schedule is overwritten (MariaDB assigns in order, each value seeing those before)."""
    db = database
    with db.engine.begin() as conn:
        _register(conn, db, NOW, "0 * * * *", True)
    assert db.one("r", "recurring")["version"] == 1
    with db.engine.begin() as conn:
        _register(conn, db, later(60), "0 * * * *", True)  # the same schedule: stays
    kept = db.one("r", "recurring")
    assert (kept["execution_time"], kept["version"]) == (NOW, 2)
    with db.engine.begin() as conn:
        _register(conn, db, later(120), "every 5m", False)  # changed, not deterministic
    assert db.one("r", "recurring")["execution_time"] == NOW
    with db.engine.begin() as conn:
        _register(conn, db, later(180), "*/5 * * * *", True)  # changed: moves
    moved = db.one("r", "recurring")
    assert (moved["execution_time"], moved["schedule"], moved["version"]) == (
        later(180),
        "*/5 * * * *",
        4,
    )


def test_a_picked_recurring_row_is_left_alone(database: Database) -> None:
    db = database
    db.put(row("r", "recurring", schedule="0 * * * *", picked=True, picked_by="w", version=3))
    with db.engine.begin() as conn:
        _register(conn, db, later(60), "*/5 * * * *", True)
    kept = db.one("r", "recurring")
    assert (kept["execution_time"], kept["schedule"], kept["version"]) == (NOW, "0 * * * *", 3)


def _batch(db: Database, conn: Connection, rows: list[dict[str, Any]]) -> int:
    """Insert ``rows`` with the statement the scheduler uses for a batch on this database;
    how many it says it inserted."""
    scheduling = db.statements.scheduling
    if scheduling.insert_many is not None:  # rows_from_json: one object per row
        objects = [
            {**r, "execution_time": r["execution_time"].isoformat()}
            for r in ({k: v for k, v in r.items() if v is not None} for r in rows)
        ]
        params = {"rows": objects, "now": NOW, "channel": scheduling.channel}
        inserted, _notified, _earliest = conn.execute(scheduling.insert_many, params).one()
        return int(inserted)
    if scheduling.insert_rows is not None:  # json_rows: one array per row
        arrays = [
            [
                r["task_name"],
                r["task_instance"],
                json.dumps(r["task_data"]),
                r["execution_time"].astimezone(timezone.utc).replace(tzinfo=None).isoformat(" "),
                r["priority"],
                r["schedule"],
                None if r["trace_context"] is None else json.dumps(r["trace_context"]),
                r["payload_version"],
            ]
            for r in rows
        ]
        return _inserted(db, conn.execute(scheduling.insert_rows, {"rows": json.dumps(arrays)}))
    return _inserted(db, conn.execute(scheduling.insert, rows))


def test_a_batch_keeps_each_value_and_skips_the_existing_keys(database: Database) -> None:
    """The batch insert (``rows_from_json``, ``json_rows`` or many VALUES): payloads,
    times to the microsecond in any zone, text beyond ASCII, read back as the scheduler
    loads rows (``Scheduling.get``: JSON as its text)."""
    db = database
    db.put(row("t", "old", priority=4))
    zone = timezone(timedelta(hours=5, minutes=30))
    batch = [
        row(
            "t",
            f"é-{i}",
            later(i).astimezone(zone),
            task_data=PAYLOAD,
            priority=-3,
            schedule="every 1m",
            trace_context={"traceparent": "00-ab-cd-01"},
            payload_version=2,
        )
        for i in range(3)
    ]
    batch.append(row("t", "old", priority=-1))
    batch.append(row("u", "🎉", task_data=None))
    with db.engine.begin() as conn:
        assert _batch(db, conn, batch) == 4
    with db.engine.connect() as conn:
        loaded = {
            (t, i): Execution.from_row(
                conn.execute(db.statements.scheduling.get, {"key_task": t, "key_instance": i})
                .mappings()
                .one()
            )
            for t, i in db.rows()
        }
    assert loaded["t", "old"].priority == 4
    first = loaded["t", "é-1"]
    assert first.data == PAYLOAD
    assert first.execution_time == later(1)
    assert first.execution_time.tzinfo is not None
    assert first.execution_time.utcoffset() == timedelta(0)
    assert (first.priority, first.schedule, first.payload_version) == (-3, "every 1m", 2)
    assert first.trace_context == {"traceparent": "00-ab-cd-01"}
    assert (loaded["u", "🎉"].data, loaded["u", "🎉"].trace_context) == (None, None)
    assert len(loaded) == 5


@databases(lambda backend: backend.supports_notify, "no NOTIFY: an insert wakes its own process")
def test_one_insert_sends_its_notify_on_commit(database: Database) -> None:
    """``Scheduling.insert_one`` (``supports_notify``): one execution inserted and its
    NOTIFY sent in one statement: the task's name for work due now, its name and time for
    later work, nothing for a key that exists."""
    import psycopg

    db = database
    scheduling = db.statements.scheduling
    assert scheduling.insert_one is not None
    listen_url = db.engine.url.set(drivername="postgresql").render_as_string(False)
    with psycopg.connect(listen_url, autocommit=True) as listener:
        listener.execute(f'LISTEN "{scheduling.channel}"')
        inserted = []
        for instance, at in (("now", NOW), ("later", later(60)), ("now", NOW)):
            with db.engine.begin() as conn:
                params = {**row("t", instance, at), "now": NOW, "channel": scheduling.channel}
                inserted.append([at for _, at in conn.execute(scheduling.insert_one, params)])
        assert inserted == [[NOW], [later(60)], []]
        heard = [n.payload for n in listener.notifies(timeout=2, stop_after=2)]
        assert [n.payload for n in listener.notifies(timeout=0.05)] == []
    assert [read_notice(payload) for payload in heard] == [("t", None), ("t", later(60))]


def test_timestamps_come_back_as_the_instant_written(database: Database) -> None:
    """Aware timestamps in any zone are kept to the microsecond and come back aware, in
    UTC; where ``naive_timestamps`` they are stored as the UTC wall time."""
    db = database
    east = timezone(timedelta(hours=5, minutes=30))
    west = timezone(timedelta(hours=-8))
    db.put(
        row("t", "a", NOW.astimezone(east), last_heartbeat=later(1).astimezone(west)),
    )
    found = db.one("t", "a")
    assert found["execution_time"] == NOW
    assert found["execution_time"].utcoffset() == timedelta(0)
    assert found["last_heartbeat"] == later(1)
    if db.backend.naive_timestamps:
        with db.engine.connect() as conn:
            stored = conn.scalar(
                select(literal_column("CAST(execution_time AS CHAR)")).select_from(db.table)
            )
        assert stored == "2024-05-06 07:08:09.123456"


def test_a_bound_time_compares_as_its_instant(database: Database) -> None:
    """``now`` bound in another zone, to the microsecond: a row due at ``NOW`` is due at
    ``NOW`` and not a microsecond before."""
    db = database
    db.put(row("t", "a"))
    zone = timezone(timedelta(hours=-3))
    now = db.statements.running.time("now")
    due = select(func.count()).select_from(db.table).where(db.table.c.execution_time <= now)
    with db.engine.connect() as conn:
        at = conn.scalar(due, {"now": NOW.astimezone(zone)})
        before = conn.scalar(due, {"now": (NOW - timedelta(microseconds=1)).astimezone(zone)})
    assert (at, before) == (1, 0)
