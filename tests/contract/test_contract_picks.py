"""The runner's statements that differ by database: the pick and its marking (one
``UPDATE ... RETURNING``, or lock, mark and read back: ``updates_return``), a task's
turn (``task_lock``), the stamps and removals of held rows given as a list of keys
(``held_keys``: arrays, ``json_rows`` or an IN list), reviving the dead
(``returning_sees_from``), orphans, and the next due time."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from sqlalchemy import Connection, insert
from sqlalchemy.exc import DBAPIError

from sqla_scheduler.models import paused_table
from tests.contract._database import CUT_SHORT, NOW, Database, databases, later, row


def _pick(
    db: Database, conn: Connection, names: Sequence[str], limit: int, picker: str = "me"
) -> list[dict[str, Any]]:
    """``Running.pick`` at ``NOW`` in ``conn``'s transaction: the rows picked, as marked."""
    params = {"names": list(names), "limit": limit, "picker": picker, "now": NOW}
    return [dict(r._mapping) for r in db.statements.running.pick.run(conn, params)]


def _keys(rows: Sequence[Any]) -> set[tuple[str, str]]:
    return {(r["task_name"], r["task_instance"]) for r in rows}


def test_a_pick_marks_the_due_unpicked_rows_of_its_tasks_up_to_its_limit(
    database: Database,
) -> None:
    """Highest priority first, then the oldest; never a future row, a picked one, one of
    another task or of a paused task; each returned as marked: picked by the picker, its
    heartbeat now, its start cleared, its version one more."""
    db = database
    db.put(
        row("a", "1", later(-30)),
        row("a", "2", later(-20)),
        row("a", "3", later(-10)),
        row("a", "low", later(-60), priority=-1),
        row("b", "high", later(-1), priority=5, started_at=NOW, version=7),
        row("a", "future", later(1)),
        row("a", "held", later(-90), picked=True, picked_by="other", version=3),
        row("c", "other task", later(-90), priority=9),
        row("p", "paused", later(-90), priority=9),
    )
    with db.engine.begin() as conn:
        conn.execute(insert(paused_table(db.table)), {"task_name": "p", "paused_at": NOW})
    with db.connect() as conn, db.unit(conn):
        picked = _pick(db, conn, ["a", "b", "p"], limit=3)
        conn.commit()
    assert _keys(picked) == {("b", "high"), ("a", "1"), ("a", "2")}
    high = next(r for r in picked if r["task_instance"] == "high")
    assert high["picked"]
    assert (high["picked_by"], high["last_heartbeat"], high["started_at"]) == ("me", NOW, None)
    assert high["version"] == 8
    rows = db.rows()
    assert {k for k, v in rows.items() if v["picked_by"] == "me"} == _keys(picked)
    assert all(v["picked"] for v in rows.values() if v["picked_by"] == "me")
    assert (rows["a", "held"]["picked_by"], rows["a", "held"]["version"]) == ("other", 3)
    assert not any(rows[k]["picked"] for k in [("a", "3"), ("a", "low"), ("a", "future")])


def test_a_pick_leaves_out_a_row_no_scheduler_can_load(database: Database) -> None:
    """A trace context that is not an object (``Shapes.readable``): the row stays, for the
    scheduler to set aside, and the others are picked."""
    db = database
    db.put(row("a", "bad", later(-10), trace_context=[1]), row("a", "good"))
    with db.connect() as conn, db.unit(conn):
        picked = _pick(db, conn, ["a"], limit=10)
        conn.commit()
    assert _keys(picked) == {("a", "good")}
    assert db.picked() == {("a", "good")}


def test_two_picks_on_two_connections_never_take_the_same_row(database: Database) -> None:
    """The second pick skips the rows the first holds (``SKIP LOCKED``) and goes ahead
    at once; where writers take turns (``one_writer``) it waits for the first's commit."""
    db = database
    db.put(*(row("a", f"{i:02}", later(-i)) for i in range(10)))
    second: list[dict[str, Any]] = []
    failed: list[BaseException] = []
    took_turn = db.backend.task_lock == "one_writer"

    def pick_second() -> None:
        try:
            with db.connect() as conn:
                if not took_turn:
                    db.no_waiting(conn)
                with db.unit(conn):
                    second.extend(_pick(db, conn, ["a"], limit=4, picker="second"))
                    conn.commit()
        except BaseException as exc:
            failed.append(exc)

    with db.connect() as conn, db.unit(conn):
        first = _pick(db, conn, ["a"], limit=4, picker="first")
        thread = threading.Thread(target=pick_second)
        thread.start()
        if not took_turn:
            thread.join(10)  # before the first commits
            assert not thread.is_alive()
        conn.commit()
    thread.join(10)
    assert failed == []
    assert len(first) == len(second) == 4
    assert not _keys(first) & _keys(second)
    rows = db.rows()
    assert {k for k, v in rows.items() if v["picked_by"] == "first"} == _keys(first)
    assert {k for k, v in rows.items() if v["picked_by"] == "second"} == _keys(second)


def test_pickers_in_four_threads_take_every_due_row_once(database: Database) -> None:
    """Each picks up to 6 at a time until nothing is left; a unit that loses a conflict
    (``conflicted``) runs again, as the scheduler's do."""
    db = database
    db.put(*(row("a" if i % 2 else "b", f"{i:03}", later(-(i % 9))) for i in range(80)))
    taken: list[tuple[str, str, str]] = []
    failed: list[BaseException] = []

    def picker(name: str) -> None:
        try:
            while True:
                try:
                    picked = db.run(lambda conn: _pick(db, conn, ["a", "b"], 6, picker=name))
                except DBAPIError as exc:
                    if db.backend.conflicted(exc):
                        continue
                    raise
                if not picked:
                    return
                taken.extend((r["task_name"], r["task_instance"], name) for r in picked)
        except BaseException as exc:
            failed.append(exc)

    threads = [threading.Thread(target=picker, args=(f"p{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert failed == []
    assert len(taken) == 80
    assert len({(t, i) for t, i, _ in taken}) == 80
    rows = db.rows()
    assert all(rows[t, i]["picked_by"] == name for t, i, name in taken)


def _take_turn(db: Database, conn: Connection, task: str) -> None:
    """Open a unit of work on ``conn`` and wait for ``task``'s turn to pick
    (``Running.lock_task``; none where writers take turns, the unit's start is it)."""
    db.backend.unit_of_work(lambda c: c)(conn)
    lock = db.statements.running.lock_task
    if lock is not None:
        conn.execute(lock, {"lock_key": ord(task)})


def test_picks_of_a_limited_task_take_turns(database: Database) -> None:
    """While one picker has a task's turn, another's waits for it (here: fails soon
    instead of waiting on), and gets it once the first commits. An ``advisory`` lock is the
    task's own; the others make every limited pick take turns."""
    db = database
    with db.connect() as first, db.no_waiting(db.connect(), CUT_SHORT) as second:
        _take_turn(db, first, "a")
        with pytest.raises(DBAPIError):
            _take_turn(db, second, "a")
        second.rollback()
        if db.backend.task_lock == "advisory":
            _take_turn(db, second, "b")
        else:
            with pytest.raises(DBAPIError):
                _take_turn(db, second, "b")
        second.rollback()
        first.commit()
        with db.no_waiting(db.connect()) as third:
            _take_turn(db, third, "a")
            third.commit()


@databases(
    lambda backend: backend.task_lock != "one_writer",
    "one writer at a time: an insert waits for the pick's commit",
)
def test_an_insert_does_not_wait_for_an_open_pick(database: Database) -> None:
    """At the backend's isolation level a pick locks the rows it takes and no gaps
    between them: a new execution of the task, due among them, goes in at once."""
    db = database
    db.put(*(row("a", f"{i:02}", later(-10 * i)) for i in range(6)))
    with db.connect() as picker, db.unit(picker), db.no_waiting(db.connect()) as other:
        assert len(_pick(db, picker, ["a"], limit=6)) == 6
        other.execute(db.statements.scheduling.insert, [row("a", "05b", later(-55))])
        other.execute(db.statements.scheduling.insert, [row("a", "new", later(-1000))])
        other.commit()
        picker.commit()
    assert len(db.rows()) == 8


def test_the_next_due_time_is_the_earliest_future_unpicked_row_of_its_tasks(
    database: Database,
) -> None:
    db = database
    db.put(
        row("a", "due", later(-1)),
        row("a", "held", later(5), picked=True),
        row("a", "next", later(10), priority=-2),
        row("a", "after", later(20), priority=3),
        row("c", "other task", later(2)),
        row("p", "paused", later(3)),
    )
    with db.engine.begin() as conn:
        conn.execute(insert(paused_table(db.table)), {"task_name": "p", "paused_at": NOW})
        next_due = db.statements.running.next_due
        assert conn.scalar(next_due, {"names": ["a", "p"], "now": NOW}) == later(10)
        assert conn.scalar(next_due, {"names": ["p"], "now": NOW}) is None


def _held(db: Database) -> list[tuple[str, str, int]]:
    """Rows held by ``me``: two tasks, text beyond ASCII, and two keys that differ by case
    alone; returns their (task, instance, version) keys."""
    keys = [("a", "x", 2), ("a", "X", 3), ("b", "é🎉", 9)]
    db.put(*(row(t, i, picked=True, picked_by="me", version=v) for t, i, v in keys))
    return keys


def _stamp(db: Database, stamp: str, keys: Sequence[tuple[str, str, int]]) -> set[Any]:
    statement = getattr(db.statements.running, stamp)
    rows = db.run(lambda conn: statement.run(conn, {**db.backend.bind_held_keys(keys), "now": NOW}))
    return {(r.task_name, r.task_instance) for r in rows}


@pytest.mark.parametrize(
    ("stamp", "column"), [("heartbeat", "last_heartbeat"), ("mark_started", "started_at")]
)
def test_a_stamp_of_held_rows_reaches_those_still_held_at_their_versions(
    database: Database, stamp: str, column: str
) -> None:
    """The keys a runner holds, bound as a list (``held_keys``): a key at another version,
    or of a row no longer picked, is left out, and what was stamped is returned."""
    db = database
    keys = _held(db)
    db.put(row("a", "unpicked", version=1))
    given = [keys[0], ("a", "X", 4), keys[2], ("a", "unpicked", 1), ("a", "gone", 1)]
    assert _stamp(db, stamp, given) == {("a", "x"), ("b", "é🎉")}
    rows = db.rows()
    assert {k for k, v in rows.items() if v[column] == NOW} == {("a", "x"), ("b", "é🎉")}
    assert rows["a", "x"]["version"] == 2  # a stamp changes no state


def test_a_stamp_binds_a_thousand_keys(database: Database) -> None:
    """As many keys as the scheduler binds in one statement (``_store.PER_STATEMENT``)."""
    db = database
    keys = [("a", f"{i:04}", 1) for i in range(1000)]
    db.put(*(row(t, i, picked=True) for t, i, _ in keys[:3]))
    assert _stamp(db, "heartbeat", keys) == {("a", "0000"), ("a", "0001"), ("a", "0002")}


def test_removing_held_rows_deletes_those_at_their_versions(database: Database) -> None:
    """``Running.remove_many``: returns the keys it deleted."""
    db = database
    keys = _held(db)
    given = [keys[0], ("a", "X", 4), keys[2]]
    removed = db.run(
        lambda conn: db.statements.running.remove_many.run(conn, db.backend.bind_held_keys(given))
    )
    assert {tuple(r)[:2] for r in removed} == {("a", "x"), ("b", "é🎉")}
    assert set(db.rows()) == {("a", "X")}


def test_a_reschedule_moves_an_unpicked_row_and_returns_its_new_time(
    database: Database,
) -> None:
    """``Scheduling.reschedule`` (one statement, or lock, mark and read back): the payload
    too when given; a picked row is not moved."""
    db = database
    db.put(row("a", "free", version=4), row("a", "held", picked=True, version=4))
    move = db.statements.scheduling.reschedule(new_data=True, shown=False)

    def reschedule(instance: str) -> Callable[[Connection], Any]:
        params = {
            "key_task": "a",
            "key_instance": instance,
            "new_time": later(30),
            "new_data": {"n": "ü"},
            "new_payload_version": 3,
        }
        return lambda conn: [tuple(r) for r in move.run(conn, params)]

    assert db.run(reschedule("free")) == [(later(30),)]
    assert db.run(reschedule("held")) == []
    rows = db.rows()
    free = rows["a", "free"]
    assert (free["execution_time"], free["task_data"], free["payload_version"]) == (
        later(30),
        {"n": "ü"},
        3,
    )
    assert free["version"] == 5
    assert (rows["a", "held"]["execution_time"], rows["a", "held"]["version"]) == (NOW, 4)


def _revive(db: Database, conn: Connection, threshold: Any) -> list[dict[str, Any]]:
    """Revive the dead as the scheduler does: one statement where RETURNING sees the rows
    as found (``returning_sees_from``), else found, then revived by their keys."""
    running = db.statements.running
    params = {"threshold": threshold, "now": NOW}
    if running.revive is not None:
        return [dict(r) for r in conn.execute(running.revive, params).mappings()]
    found = {(r[0], r[1]): r for r in conn.execute(running.find_dead, params)}
    keys = [(t, i, r.version) for (t, i), r in found.items()]
    revived = running.revive_found.run(conn, {**params, **db.backend.bind_held_keys(keys)})
    return [
        {**r._mapping, "picked_by": found[r.task_name, r.task_instance].picked_by}
        | {"started_at": found[r.task_name, r.task_instance].started_at}
        for r in revived
    ]


def test_reviving_makes_the_dead_due_and_returns_them_as_found(database: Database) -> None:
    """A picked row whose heartbeat is older than the threshold (or missing) is due now
    again, unpicked, a started one's attempt counted as a failure; returned with who had
    picked it and when it started."""
    db = database
    db.put(
        row("a", "started", later(-100), picked=True, picked_by="gone", version=2)
        | {"last_heartbeat": later(-60), "started_at": later(-90), "consecutive_failures": 1},
        row("a", "queued", later(-100), picked=True, picked_by="gone", version=2)
        | {"last_heartbeat": None},
        row("a", "alive", later(-100), picked=True, picked_by="here", last_heartbeat=later(-1)),
    )
    revived = db.run(lambda conn: _revive(db, conn, later(-30)))
    found = {r["task_instance"]: r for r in revived}
    assert set(found) == {"started", "queued"}
    assert (found["started"]["picked_by"], found["started"]["started_at"]) == ("gone", later(-90))
    assert found["queued"]["picked_by"] == "gone"
    rows = db.rows()
    started = rows["a", "started"]
    assert not started["picked"]
    assert (started["picked_by"], started["execution_time"], started["started_at"]) == (
        None,
        NOW,
        None,
    )
    assert (started["consecutive_failures"], started["version"]) == (2, 3)
    assert rows["a", "queued"]["consecutive_failures"] == 0
    assert rows["a", "alive"]["picked"]


def test_orphans_are_deleted_with_their_payloads(database: Database) -> None:
    """``Running.delete_orphans``: unpicked rows of tasks no scheduler knows, due before the
    threshold, go and are returned with their payloads."""
    db = database
    db.put(
        row("gone", "1", later(-100), task_data={"ü": 1}),
        row("gone", "recent", later(-1)),
        row("gone", "held", later(-100), picked=True),
        row("known", "1", later(-100)),
    )
    deleted = db.run(
        lambda conn: db.statements.running.delete_orphans.run(
            conn, {"names": ["known"], "threshold": later(-10)}
        )
    )
    assert [(r.task_name, r.task_instance) for r in deleted] == [("gone", "1")]
    assert set(db.rows()) == {("gone", "recent"), ("gone", "held"), ("known", "1")}
    assert deleted[0].task_data == {"ü": 1}
