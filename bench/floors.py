"""The raw-SQL floors: what the database itself does for the work the library does,
measured with the plain driver (psycopg; PyMySQL on MariaDB) on one connection, in the
same run, for the library's figures to be compared with.

(a) drain: pick due rows ``FOR UPDATE SKIP LOCKED`` and delete them, a batch per
transaction; (b) one ``INSERT`` per transaction; (c) ``executemany`` of a batch per
transaction. (The floors of one ``schedule`` call are measured interleaved with it, in
``scheduling``.) The SQL is each database's (``bench.databases``).
"""

from __future__ import annotations

import time

from bench.harness import Bench
from bench.results import Figure, ScenarioError


def floor_drain(bench: Bench) -> Figure:
    n, pick = bench.counts.drain_rows, bench.counts.drain_pick
    db = bench.new_db("floor_drain")
    server = bench.server
    with bench.connect(db) as conn:
        with conn.cursor() as cur:
            cur.executemany(server.insert_sql, bench.rows("d", n))
        conn.commit()
        if bench.count(conn) != n:
            raise ScenarioError("floor drain: rows not inserted")
        conn.commit()
        done = 0
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            while True:
                cur.execute(server.pick_sql, (pick,))
                keys = cur.fetchall()
                if not keys:
                    conn.commit()
                    break
                server.delete_keys(cur, keys)
                conn.commit()
                done += len(keys)
        elapsed = time.perf_counter() - t0
        server.flush_stats(conn)
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
    rows = bench.rows("s", n)
    with bench.connect(db) as conn:
        bench.count(conn)  # the connection is ready before the clock starts
        conn.commit()
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            for row in rows:
                cur.execute(bench.server.insert_sql, row)
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
        bench.count(conn)
        conn.commit()
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            for j in range(txns):
                cur.executemany(bench.server.insert_sql, bench.rows(f"b{j:03d}-", size))
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
