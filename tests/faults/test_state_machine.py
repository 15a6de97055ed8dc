"""Property test of the table's state machine: random interleavings of schedule, pick,
heartbeat, complete (remove, succeed, fail, release), revive, reschedule and cancel, by
two schedulers, drive the real ``_store`` functions on SQLite and PostgreSQL and keep the table
consistent with a simple model:

- a row is picked exactly when it has a ``picked_by`` and a heartbeat;
- every change of a row's state bumps its version; versions never go back;
- an outcome, heartbeat, reschedule or cancel is recorded exactly when the model says the
  caller may (it still holds that version; the row is not running);
- a pick returns only due, unpicked rows, and never more than asked;
- a recorded outcome leaves exactly one history entry (``history="all"``), an unrecorded one
  none.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test
from sqlalchemy import Engine, create_engine, func, select

from sqla_scheduler import _store
from sqla_scheduler._statements import statements_on
from sqla_scheduler._store import Completion
from sqla_scheduler.executions import Execution
from sqla_scheduler.models import history_table, table_for
from sqla_scheduler.tasks import KEEP, TaskInstance
from tests.support import sqlite_file_url
from tests.support.faults import SOAK

T0 = datetime(2030, 1, 1, tzinfo=timezone.utc)
TABLE = table_for()
HISTORY = history_table(TABLE)
OUTCOME = {"remove": "succeeded", "succeed": "succeeded", "fail": "failed", "release": None}
IDS = [f"i{n}" for n in range(5)]
PICKERS = ["A", "B"]
#: Generated runs: half of Hypothesis's default in the suite, where it is the slowest
#: in-process test; ten times that in the soak.
RUNS = 500 if SOAK else 50
STATE = ("execution_time", "picked", "picked_by", "consecutive_failures", "task_data")


@dataclass
class Row:
    version: int
    picked_by: str | None
    execution_time: datetime


class TableMachine(RuleBasedStateMachine):
    engine: Engine

    def __init__(self) -> None:
        super().__init__()
        with self.engine.begin() as conn:
            conn.execute(TABLE.delete())
            conn.execute(HISTORY.delete())
        self.now = T0
        self.entries = 0
        self.model: dict[str, Row] = {}
        self.held: dict[str, list[Execution]] = {p: [] for p in PICKERS}
        self.seen: dict[str, dict[str, Any]] = {}

    def run(self, fn: Any, **kwargs: Any) -> Any:
        with self.engine.begin() as conn:
            return fn(conn, statements_on(conn, TABLE), **kwargs)

    def at(self, minutes: int) -> datetime:
        return self.now + timedelta(minutes=minutes)

    @rule(instance=st.sampled_from(IDS), minutes=st.integers(-2, 3))
    def schedule(self, instance: str, minutes: int) -> None:
        at = self.at(minutes)
        new = TaskInstance(
            task_name="t", instance_id=instance, data={"n": minutes}, execution_time=at, priority=0
        )
        inserted = self.run(_store.insert_instances, instances=[new], now=self.now)
        assert inserted == (instance not in self.model)
        if inserted:
            self.model[instance] = Row(1, None, at)

    @rule(minutes=st.integers(0, 3))
    def tick(self, minutes: int) -> None:
        self.now += timedelta(minutes=minutes)

    @rule(picker=st.sampled_from(PICKERS), limit=st.integers(1, 4))
    def pick(self, picker: str, limit: int) -> None:
        picked = self.run(_store.pick, names=["t"], limit=limit, picker=picker, now=self.now)
        due = {
            i for i, r in self.model.items() if r.picked_by is None and r.execution_time <= self.now
        }
        assert len(picked) == min(limit, len(due))
        for e in picked:
            assert e.instance_id in due
            row = self.model[e.instance_id]
            assert e.version == row.version + 1
            row.version, row.picked_by = e.version, picker
            self.held[picker].append(e)

    def mine(self, picker: str, e: Execution) -> bool:
        row = self.model.get(e.instance_id)
        return row is not None and row.version == e.version and row.picked_by == picker

    @rule(picker=st.sampled_from(PICKERS))
    def heartbeat(self, picker: str) -> None:
        keys = [("t", e.instance_id, e.version) for e in self.held[picker]]
        refreshed = self.run(_store.heartbeat, held=keys, now=self.now)
        expected = {("t", e.instance_id) for e in self.held[picker] if self.mine(picker, e)}
        assert refreshed == expected

    @rule(
        picker=st.sampled_from(PICKERS),
        index=st.integers(0, 7),
        kind=st.sampled_from(["remove", "succeed", "fail", "release"]),
        minutes=st.integers(-1, 3),
    )
    def complete(self, picker: str, index: int, kind: Any, minutes: int) -> None:
        held = self.held[picker]
        if not held:
            return
        e = held.pop(index % len(held))
        at = self.at(minutes) if kind in ("succeed", "fail") else None
        c = Completion(
            execution=e,
            kind=kind,
            now=self.now,
            at=at,
            data={"k": kind},
            failures=1,
            outcome=OUTCOME[kind],
        )
        [recorded] = self.run(_store.complete, batch=[c], history="all")
        assert recorded == self.mine(picker, e)
        if not recorded:
            return
        # The entry is written with the outcome, in its transaction, or not at all.
        self.entries += OUTCOME[kind] is not None
        if kind == "remove":
            del self.model[e.instance_id]
            return
        row = self.model[e.instance_id]
        row.version, row.picked_by = row.version + 1, None
        if at is not None:
            row.execution_time = at

    @rule(minutes=st.integers(0, 3))
    def revive(self, minutes: int) -> None:
        threshold = self.now - timedelta(minutes=minutes)
        revived = self.run(_store.revive, threshold=threshold, now=self.now)
        for e in revived:
            row = self.model[e.instance_id]
            assert row.picked_by is not None
            assert e.picked_by == row.picked_by
            assert e.last_heartbeat is not None
            assert e.last_heartbeat < threshold
            row.version, row.picked_by, row.execution_time = row.version + 1, None, self.now

    @rule(instance=st.sampled_from(IDS), minutes=st.integers(-1, 3))
    def reschedule(self, instance: str, minutes: int) -> None:
        at = self.at(minutes)
        moved = self.run(
            _store.reschedule, task_name="t", instance_id=instance, at=at, data=KEEP, now=self.now
        )
        row = self.model.get(instance)
        assert moved == (row is not None and row.picked_by is None)
        if moved and row is not None:
            row.execution_time = at
            row.version = self.seen_version(instance)

    @rule(instance=st.sampled_from(IDS))
    def cancel(self, instance: str) -> None:
        cancelled = self.run(_store.cancel, task_name="t", instance_id=instance)
        row = self.model.get(instance)
        assert cancelled == (row is not None and row.picked_by is None)
        if cancelled:
            del self.model[instance]

    def seen_version(self, instance: str) -> int:
        with self.engine.connect() as conn:
            return int(
                conn.scalar(select(TABLE.c.version).where(TABLE.c.task_instance == instance))
            )

    @invariant()
    def consistent(self) -> None:
        with self.engine.connect() as conn:
            rows = {r["task_instance"]: dict(r) for r in conn.execute(select(TABLE)).mappings()}
            entries = conn.scalar(select(func.count()).select_from(HISTORY))
        assert entries == self.entries
        assert set(rows) == set(self.model)
        for instance, r in rows.items():
            row = self.model[instance]
            assert r["picked"] == (r["picked_by"] is not None) == (r["last_heartbeat"] is not None)
            assert r["picked_by"] == row.picked_by
            assert r["version"] == row.version
            assert r["execution_time"] == row.execution_time
            assert r["consecutive_failures"] >= 0
            before = self.seen.get(instance)
            if before is not None:
                assert r["version"] >= before["version"]
                if any(r[k] != before[k] for k in STATE):
                    assert r["version"] > before["version"], (before, r)
        self.seen = rows


@pytest.mark.parametrize("backend", ["sqlite", "postgresql", "mariadb"])
@pytest.mark.slow
def test_the_table_follows_the_state_machine(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Slow by nature: generated runs of up to 40 steps each against a real database (50 in
    the suite, 500 in the soak)."""
    if backend == "sqlite":
        url = sqlite_file_url(request.getfixturevalue("sqlite_template"), tmp_path)
    else:
        url = request.getfixturevalue("pg_url" if backend == "postgresql" else "mariadb_url")
    engine = create_engine(url)
    try:
        TableMachine.engine = engine
        run_state_machine_as_test(
            TableMachine,
            settings=settings(
                max_examples=RUNS,
                stateful_step_count=40,
                deadline=None,
                suppress_health_check=[HealthCheck.too_slow],
            ),
        )
    finally:
        engine.dispose()
