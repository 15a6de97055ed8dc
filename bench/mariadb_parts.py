"""Where the time of two MariaDB figures goes, on one server without fsync (so that the
disk's moods do not hide a few microseconds), in one run::

    python bench/mariadb_parts.py schedule   # Scheduler.schedule and what it stands on
    python bench/mariadb_parts.py probe      # the due-time read with rows ahead

``schedule``: one execution per transaction, ``ROUNDS`` rounds of ``PER_ROUND`` calls of
each way in turn, the median microseconds per call of each: a raw PyMySQL INSERT and
COMMIT (the bench's floor), the same plus the ROLLBACK SQLAlchemy's pool sends when the
connection goes back, the scheduler's INSERT through SQLAlchemy Core
(``engine.begin()``), and ``Scheduler.schedule(engine, instance)``.

``probe``: ``--rows`` future executions of three tasks at four priorities, then the
median of 20 runs of the statement an idle scheduler probes with once a second.

``bench/run.py`` runs neither: they explain its ``schedule`` figure and the probe's cost
(see ``docs/performance.md``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pymysql  # noqa: E402
from sqlalchemy import Engine, create_engine  # noqa: E402

from sqla_scheduler import Scheduler, migrate  # noqa: E402
from sqla_scheduler._dialects import backend_for  # noqa: E402
from sqla_scheduler._statements import statements_for  # noqa: E402
from sqla_scheduler.models import table_for  # noqa: E402
from sqla_scheduler.tasks import one_time  # noqa: E402
from tests.support.servers.mariadb import MariaDBServer  # noqa: E402

ROUNDS, PER_ROUND = 6, 2000
_RAW_INSERT = (
    "INSERT IGNORE INTO scheduled_tasks (task_name, task_instance, execution_time)"
    " VALUES (%s, %s, %s)"
)


def _connect(server: MariaDBServer) -> Any:
    return pymysql.connect(
        host=server.host, port=server.port, user=server.user, database="t", ssl_disabled=True
    )


def schedule(server: MariaDBServer, engine: Engine) -> None:
    task = one_time("bench")(lambda ctx: None)
    client = Scheduler(engine, [task])
    insert = statements_for(table_for(), backend_for(engine.dialect)).scheduling.insert
    raw = _connect(server)
    cur = raw.cursor()
    now = datetime.now(timezone.utc)

    def raw_insert(key: str) -> None:
        cur.execute(_RAW_INSERT, ("bench", key, now.replace(tzinfo=None)))
        raw.commit()

    def raw_insert_rollback(key: str) -> None:
        raw_insert(key)
        raw.rollback()

    def core(key: str) -> None:
        values: dict[str, object] = {"task_name": "bench", "task_instance": key, "task_data": None}
        values |= {"execution_time": now, "priority": 0, "schedule": None}
        with engine.begin() as conn:
            conn.execute(insert, [values | {"trace_context": None, "payload_version": 1}])

    def library(key: str) -> None:
        client.schedule(engine, task.instance(key))

    ways: dict[str, Callable[[str], None]] = {
        "raw INSERT + COMMIT": raw_insert,
        "  + the pool's ROLLBACK": raw_insert_rollback,
        "SQLAlchemy Core, engine.begin()": core,
        "Scheduler.schedule(engine, ...)": library,
    }
    with engine.connect():
        pass  # the pool's connection, opened before the clock starts
    took: dict[str, list[float]] = {name: [] for name in ways}
    for r in range(ROUNDS):
        for name, way in ways.items():
            start = time.perf_counter()
            for i in range(PER_ROUND):
                way(f"{name[:6]}-{r}-{i}")
            took[name].append((time.perf_counter() - start) / PER_ROUND * 1e6)
    for name, each in took.items():
        print(f"{name:34} {statistics.median(each):7.1f} us per call (median of {ROUNDS})")


def probe(server: MariaDBServer, engine: Engine, rows: int) -> None:
    table = table_for()
    now = datetime.now(timezone.utc)
    stored = now.replace(tzinfo=None)  # naive UTC, as the scheduler stores times there
    raw = _connect(server)
    with raw.cursor() as cur:
        for start in range(0, rows, 5000):
            cur.executemany(
                "INSERT INTO scheduled_tasks (task_name, task_instance, execution_time,"
                " priority) VALUES (%s, %s, %s, %s)",
                [
                    (f"task{i % 3}", f"i{i}", stored + timedelta(seconds=60 + i), i % 4)
                    for i in range(start, min(rows, start + 5000))
                ],
            )
        raw.commit()
        cur.execute("ANALYZE TABLE scheduled_tasks")
    next_due = statements_for(table, backend_for(engine.dialect)).running.next_due
    params: dict[str, object] = {"names": ["task0", "task1", "task2"], "now": now}
    took = []
    with engine.connect() as conn:
        for _ in range(21):
            t0 = time.perf_counter()
            conn.execute(next_due, params).all()
            took.append((time.perf_counter() - t0) * 1e3)
    print(f"due-time read, {rows:,} future rows: {statistics.median(took[1:]):.2f} ms (median)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=["schedule", "probe"])
    parser.add_argument("--rows", type=int, default=100_000, help="probe: rows ahead")
    args = parser.parse_args()
    with MariaDBServer() as server:
        server.create_database("t")
        migrate.upgrade(server.url("t"))
        engine = create_engine(server.url("t"))
        try:
            if args.what == "schedule":
                schedule(server, engine)
            else:
                probe(server, engine, args.rows)
        finally:
            engine.dispose()


if __name__ == "__main__":
    main()
