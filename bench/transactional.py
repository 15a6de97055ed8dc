"""What a transactional handler costs: the drain of a no-op task defined with
``transactional=True`` (one transaction per execution, holding the handler and its
outcome) beside the batched drain (``drain_async_1``) and a raw floor of one transaction
per row.

- ``floor_row_tx`` (d): the raw driver on one connection, ``drain_rows / 10`` due rows, each
  in a transaction of its own: an ``UPDATE`` that marks it picked, a ``DELETE`` of it and
  a commit, which is the least a per-execution transaction does.
- ``drain_transactional``: as many due executions of the no-op task with
  ``transactional=True``, drained by one async worker (concurrency 10): a batched pick,
  then for each execution a transaction with the session flushed, the guarded ``DELETE``
  and the commit.
"""

from __future__ import annotations

import time

from bench.harness import TASK_NAME, Bench
from bench.results import Figure, ScenarioError
from bench.scenarios import drain

UPDATE_SQL = (
    "UPDATE scheduled_tasks SET picked = true, picked_by = 'floor', last_heartbeat = {now},"
    " version = version + 1 WHERE task_name = %s AND task_instance = %s"
)
DELETE_ONE_SQL = "DELETE FROM scheduled_tasks WHERE task_name = %s AND task_instance = %s"


def rows(bench: Bench) -> int:
    return max(bench.counts.drain_rows // 10, 200)


def floor_row_tx(bench: Bench) -> Figure:
    n = rows(bench)
    db = bench.new_db("floor_row_tx")
    keys = [(TASK_NAME, f"t{i:07d}") for i in range(n)]
    update = UPDATE_SQL.format(now=bench.server.now_sql)
    with bench.connect(db) as conn:
        with conn.cursor() as cur:
            cur.executemany(bench.server.insert_sql, bench.rows("t", n))
        conn.commit()
        t0 = time.perf_counter()
        with conn.cursor() as cur:
            for key in keys:
                cur.execute(update, key)
                cur.execute(DELETE_ONE_SQL, key)
                conn.commit()
        elapsed = time.perf_counter() - t0
        if bench.count(conn) != 0:
            raise ScenarioError("floor row_tx: rows left")
    return bench.add(
        Figure(
            "floor_row_tx",
            "(d) raw: UPDATE + DELETE + commit per row, 1 conn",
            n / elapsed,
            "rows/s",
            notes=f"{n:,} rows in {elapsed:.2f}s",
        )
    )


def drain_transactional(bench: Bench) -> Figure:
    return drain(
        bench,
        "drain_transactional",
        "drain: 1 process, async, transactional=True",
        "async",
        1,
        floor_key="floor_row_tx",
        extra=["--transactional"],
        rows=rows(bench),
    )
