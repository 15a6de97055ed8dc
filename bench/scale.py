"""Cost that does not grow with the table: the same 20,000 due executions drained, picked
and waited for with the table otherwise empty and behind 1,000,000 future executions of
the same task and 100,000 orphans (due rows of task names no worker knows).

Besides the drain (by one ``bench/worker.py`` process, as ``drain_async_1``), it times
the picker's two statements as the worker runs them, a pick of 50 and the next-due query,
on both tables (the median of repeated runs, each rolled back), and records their
``EXPLAIN ANALYZE`` plans and those of the dead-execution check, before and after the
drain's churn, with the size of each index.
"""

from __future__ import annotations

import statistics
import time
from datetime import timedelta
from typing import Any

from sqlalchemy import Connection, Delete, Select, Update

from bench.harness import TASK_NAME, Bench, utc_now
from bench.results import Figure, ScenarioError
from bench.scenarios import drain
from sqla_scheduler._statements import statements_on
from sqla_scheduler.models import table_for

FUTURE_ROWS = 1_000_000
ORPHAN_ROWS = 100_000
ORPHAN_TASKS = 10
PICK_LIMIT = 50
REPEATS = 30

_FILL = (
    # the future executions: an hour ahead and later, one a millisecond
    f"INSERT INTO scheduled_tasks (task_name, task_instance, execution_time)"
    f" SELECT '{TASK_NAME}', 'f' || g, now() + interval '1 hour' + g * interval '1 ms'"
    f" FROM generate_series(1, {FUTURE_ROWS}) g",
    # the orphans: due an hour ago, before every due row of the bench's task
    f"INSERT INTO scheduled_tasks (task_name, task_instance, execution_time)"
    f" SELECT 'gone-' || (g % {ORPHAN_TASKS}), 'o' || g, now() - interval '1 hour'"
    f" FROM generate_series(1, {ORPHAN_ROWS}) g",
)
_DUE = (
    f"INSERT INTO scheduled_tasks (task_name, task_instance, execution_time)"
    f" SELECT '{TASK_NAME}', 'd' || g, now() FROM generate_series(1, %d) g"
)
_INDEX_SIZES = (
    "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes"
    " WHERE relname = 'scheduled_tasks' ORDER BY indexrelname"
)


def scale(bench: Bench) -> list[Figure]:
    n = bench.counts.drain_rows
    small, big = bench.new_db("scale_small"), bench.new_db("scale_big")
    _fill(bench, big)
    timings: dict[str, dict[str, float]] = {}
    for label, db in (("small", small), ("big", big)):
        _add_due(bench, db, n)
        timings[label] = _time_statements(bench, db)
        if label == "big":
            bench.plans["before the drain, 1,000,000 future + 100,000 orphans"] = _plans(bench, db)
            bench.index_sizes["before the drain"] = _index_sizes(bench, db)
    with bench.postgres.connect(big, autocommit=True) as conn:  # the drain schedules its own
        conn.execute("DELETE FROM scheduled_tasks WHERE task_instance LIKE 'd%'")
        conn.execute("VACUUM scheduled_tasks")  # as autovacuum would, within a minute
    figure = drain(
        bench,
        "drain_scale",
        "drain: 1 process, async, behind 1,000,000 future + 100,000 orphan rows",
        "async",
        1,
        db=big,
        floor_key="drain_async_1",
    )
    bench.plans["after the drain"] = _plans(bench, big)
    bench.index_sizes["after the drain"] = _index_sizes(bench, big)
    figures = [figure]
    for name in ("pick", "next_due"):
        t_small, t_big = timings["small"][name], timings["big"][name]
        figures.append(
            bench.add(
                Figure(
                    f"scale_{name}",
                    f"{name.replace('_', '-')} query behind 1,000,000 future + 100,000 orphans",
                    t_big,
                    "ms",
                    floor=t_small,
                    floor_key=f"scale_{name}_small",
                    target="<= 2x the 20,000-row table",
                    met=t_big <= 2 * t_small,
                    notes=f"{t_small:.3f} ms with 20,000 rows only; median of {REPEATS}",
                )
            )
        )
    return figures


def _fill(bench: Bench, db: str) -> None:
    with bench.postgres.connect(db, autocommit=True) as conn:
        for statement in _FILL:
            conn.execute(statement)
        conn.execute("VACUUM ANALYZE scheduled_tasks")


def _add_due(bench: Bench, db: str, n: int) -> None:
    with bench.postgres.connect(db, autocommit=True) as conn:
        conn.execute(_DUE % n)
        conn.execute("ANALYZE scheduled_tasks")
        if bench.count_due(conn) != n:
            raise ScenarioError("scale: due rows not inserted")


#: A statement the picker runs, and its parameters.
Statement = tuple[Select[Any] | Update | Delete, dict[str, Any]]


def _picker_statements(conn: Connection) -> dict[str, Statement]:
    running = statements_on(conn, table_for()).running
    assert running.pick.one is not None  # one UPDATE ... RETURNING on PostgreSQL
    now = utc_now()
    names = [TASK_NAME]
    return {
        "pick": (
            running.pick.one,
            {"names": names, "now": now, "limit": PICK_LIMIT, "picker": "bench"},
        ),
        "next_due": (running.next_due, {"names": names, "now": now}),
        "dead": (running.find_dead, {"threshold": now - timedelta(minutes=5)}),
    }


def _time_statements(bench: Bench, db: str) -> dict[str, float]:
    """Median ms of each picker statement on ``db``, each run rolled back."""
    engine = bench.engine(db)
    found: dict[str, float] = {}
    try:
        with engine.connect() as conn:
            for name, (statement, params) in _picker_statements(conn).items():
                samples = []
                for _ in range(REPEATS):
                    t0 = time.perf_counter()
                    conn.execute(statement, params).all()
                    samples.append((time.perf_counter() - t0) * 1000.0)
                    conn.rollback()
                found[name] = statistics.median(samples)
    finally:
        engine.dispose()
    return found


def _plans(bench: Bench, db: str) -> dict[str, list[str]]:
    """``EXPLAIN ANALYZE`` of each picker statement on ``db``, rolled back: the plan's
    node lines (conditions and filters left out)."""
    engine = bench.engine(db)
    plans: dict[str, list[str]] = {}
    try:
        with engine.connect() as conn:
            for name, (statement, params) in _picker_statements(conn).items():
                compiled = statement.compile(dialect=conn.dialect)
                sql = f"EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF) {compiled}"
                rows = conn.exec_driver_sql(sql, compiled.construct_params(params))
                plans[name] = [line for (line,) in rows if _is_node(line)]
                conn.rollback()
    finally:
        engine.dispose()
    return plans


def _is_node(line: str) -> bool:
    kept = line.strip()
    return not kept.startswith(("Filter:", "Index Cond:", "Recheck Cond:", "Rows Removed"))


def _index_sizes(bench: Bench, db: str) -> dict[str, int]:
    with bench.postgres.connect(db, autocommit=True) as conn:
        return {name: int(size) for name, size in conn.execute(_INDEX_SIZES)}
