"""The raw-SQL floors: what PostgreSQL itself does for the work the library does, measured
with plain psycopg on one connection, in the same run, for the library's figures to be
compared with.

(a) drain: pick due rows ``FOR UPDATE SKIP LOCKED`` and delete them, a batch per
transaction; (b) one ``INSERT`` per transaction; (c) ``executemany`` of a batch per
transaction. (The floors of one ``schedule`` call are measured interleaved with it, in
``single``.)
"""

from __future__ import annotations

import contextlib
import time

import psycopg
from psycopg.types.json import Jsonb

from bench.harness import INSERT_SQL, TASK_NAME, Bench, due_rows, utc_now
from bench.results import Figure, ScenarioError

PICK_SQL = (
    "SELECT task_name, task_instance FROM scheduled_tasks"
    " WHERE picked = false AND execution_time <= now()"
    " ORDER BY priority DESC, execution_time LIMIT %s FOR UPDATE SKIP LOCKED"
)
DELETE_SQL = (
    "DELETE FROM scheduled_tasks WHERE (task_name, task_instance) IN"
    " (SELECT * FROM unnest(%s::varchar[], %s::varchar[]))"
)


def floor_drain(bench: Bench) -> Figure:
    n, pick = bench.counts.drain_rows, bench.counts.drain_pick
    db = bench.new_db("floor_drain")
    with bench.connect(db) as conn:
        with conn.cursor() as cur:
            cur.executemany(INSERT_SQL, due_rows("d", n))
        conn.commit()
        if bench.count(conn) != n:
            raise ScenarioError("floor drain: rows not inserted")
        conn.commit()
        done = 0
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            while True:
                cur.execute(PICK_SQL, (pick,))
                keys = cur.fetchall()
                if not keys:
                    conn.commit()
                    break
                cur.execute(DELETE_SQL, ([k[0] for k in keys], [k[1] for k in keys]))
                conn.commit()
                done += len(keys)
        elapsed = time.perf_counter() - t0
        with contextlib.suppress(psycopg.Error):
            conn.execute("SELECT pg_stat_force_next_flush()")
            conn.commit()
    if done != n:
        raise ScenarioError(f"floor drain removed {done} rows, expected {n}")
    bench.read_table_stats(db, "floor (a): raw drain, 1 connection", n)
    return bench.add(
        Figure(
            "floor_drain",
            f"(a) raw drain: SELECT {pick} FOR UPDATE SKIP LOCKED + DELETE, 1 conn",
            n / elapsed,
            "rows/s",
            notes=f"{n:,} rows in {elapsed:.2f}s",
        )
    )


def floor_single(bench: Bench) -> Figure:
    n = bench.counts.single_txns
    db = bench.new_db("floor_single")
    with bench.connect(db) as conn:
        conn.execute("SELECT 1")
        conn.commit()
        t0 = time.perf_counter()
        now = utc_now()
        with conn.cursor() as cur:
            for i in range(n):
                cur.execute(INSERT_SQL, (TASK_NAME, f"s{i:07d}", Jsonb(None), now, 0))
                conn.commit()
        elapsed = time.perf_counter() - t0
        if bench.count(conn) != n:
            raise ScenarioError("floor single: rows missing")
    return bench.add(
        Figure(
            "floor_single",
            "(b) raw INSERT, one row per transaction",
            n / elapsed,
            "inserts/s",
            notes=f"{n:,} commits in {elapsed:.2f}s",
        )
    )


def floor_batch(bench: Bench) -> Figure:
    txns, size = bench.counts.batch_txns, bench.counts.batch_size
    db = bench.new_db("floor_batch")
    with bench.connect(db) as conn:
        conn.execute("SELECT 1")
        conn.commit()
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            for j in range(txns):
                cur.executemany(INSERT_SQL, due_rows(f"b{j:03d}-", size))
                conn.commit()
        elapsed = time.perf_counter() - t0
        if bench.count(conn) != txns * size:
            raise ScenarioError("floor batch: rows missing")
    return bench.add(
        Figure(
            "floor_batch",
            f"(c) raw executemany, {size:,} rows per transaction",
            txns * size / elapsed,
            "rows/s",
            notes=f"{txns} x {size:,} rows in {elapsed:.2f}s",
        )
    )
