"""What every scenario of one benchmark run shares: the cluster, a fresh database per
scenario copied from a migrated, analyzed template, connections and engines to it, and the
figures, table statistics, problems and errors the run records (``Bench``).

Also the no-op task both sides agree on (``TASK_NAME``, the one ``bench/worker.py`` runs)
and the raw ``INSERT`` of due rows that the template and the raw floors use.
"""

from __future__ import annotations

import contextlib
import sys
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import psycopg
from psycopg.types.json import Jsonb
from sqlalchemy import Engine, create_engine

from bench.results import Counts, Figure, TableStats
from sqla_scheduler import ExecutionContext, OneTimeTask, migrate, one_time
from tests._postgres import PostgresCluster

TASK_NAME = "noop"  # the task bench/worker.py runs
TEMPLATE_DB = "bench_template"

INSERT_SQL = (
    "INSERT INTO scheduled_tasks"
    " (task_name, task_instance, task_data, execution_time, priority, schedule)"
    " VALUES (%s, %s, %s, %s, %s, NULL) ON CONFLICT DO NOTHING"
)


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _noop(ctx: ExecutionContext[Any]) -> None:
    """Never run here: the bench only schedules; workers run their own ``noop``."""


def due_rows(prefix: str, n: int) -> list[tuple[Any, ...]]:
    now = utc_now()
    return [(TASK_NAME, f"{prefix}{i:07d}", Jsonb(None), now, 0) for i in range(n)]


class Bench:
    """One run: its cluster and databases, and what the scenarios record."""

    def __init__(self, cluster: PostgresCluster, counts: Counts, polling_interval: float) -> None:
        self.cluster = cluster
        self.counts = counts
        self.polling_interval = polling_interval
        self.task: OneTimeTask[Any] = one_time(TASK_NAME)(_noop)
        self.figures: dict[str, Figure] = {}
        self.table_stats: list[TableStats] = []
        self.problems: list[str] = []
        self.errors: list[str] = []
        #: ``EXPLAIN`` plans by when they were taken, then by statement (the scale scenario).
        self.plans: dict[str, dict[str, list[str]]] = {}
        #: Index sizes in bytes by when they were read, then by index (the scale scenario).
        self.index_sizes: dict[str, dict[str, int]] = {}
        self._db_seq = 0

    # --- databases ---------------------------------------------------------------

    def prepare_template(self) -> None:
        """A migrated database with planner statistics, as a table in service has.

        A table that was never analyzed leaves PostgreSQL guessing that a few rows match,
        so it sorts every due row on each pick instead of reading the due index in order
        (the raw floor's pick of 400 rows would too). Autovacuum analyzes a table in
        service within a minute of a change; here ANALYZE runs once on 100 rows, which
        are then deleted.
        """
        self.cluster.create_database(TEMPLATE_DB)
        migrate.upgrade(self.cluster.url(TEMPLATE_DB))
        with self.connect(TEMPLATE_DB, autocommit=True) as conn:
            with conn.cursor() as cur:
                cur.executemany(INSERT_SQL, due_rows("warm", 100))
            conn.execute("ANALYZE scheduled_tasks")
            conn.execute("DELETE FROM scheduled_tasks")

    def new_db(self, label: str) -> str:
        self._db_seq += 1
        name = f"b{self._db_seq:02d}_{label}"
        self.cluster.create_database(name, template=TEMPLATE_DB)
        return name

    def connect(self, db: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
        return psycopg.connect(self.cluster.dsn(db), autocommit=autocommit, connect_timeout=10)

    def engine(self, db: str) -> Engine:
        return create_engine(self.cluster.url(db))

    def count(self, conn: psycopg.Connection[Any]) -> int:
        row = conn.execute("SELECT count(*) FROM scheduled_tasks").fetchone()
        assert row is not None
        return int(row[0])

    def count_due(self, conn: psycopg.Connection[Any]) -> int:
        """The rows a drain drains (the bench's task, instances ``d...``), whatever else
        is there: a range of the primary key."""
        row = conn.execute(
            "SELECT count(*) FROM scheduled_tasks"
            " WHERE task_name = %s AND task_instance >= 'd' AND task_instance < 'e'",
            (TASK_NAME,),
        ).fetchone()
        assert row is not None
        return int(row[0])

    def read_table_stats(self, db: str, run: str, expected_deletes: int) -> None:
        """Dead tuples once every backend that touched the table has reported its stats.

        Backends report at exit (the workers are gone by now) or every second or so while
        busy; poll, bounded, until the deletes the run made are all counted.
        """
        query = (
            "SELECT n_dead_tup, n_live_tup, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del,"
            " autovacuum_count FROM pg_stat_user_tables WHERE relname = 'scheduled_tasks'"
        )
        with self.connect(db, autocommit=True) as conn:
            with contextlib.suppress(psycopg.Error):
                conn.execute("SELECT pg_stat_force_next_flush()")
            deadline = time.monotonic() + 5.0
            row: tuple[Any, ...] | None = None
            settled = False
            while True:
                conn.execute("SELECT pg_stat_clear_snapshot()")
                row = conn.execute(query).fetchone()
                if row is not None and row[5] is not None and row[5] >= expected_deletes:
                    settled = True
                    break
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        v: list[int | None] = (
            [None if x is None else int(x) for x in row] if row is not None else [None] * 7
        )
        self.table_stats.append(
            TableStats(run, v[0], v[1], v[2], v[3], v[4], v[5], v[6], settled=settled)
        )

    # --- recording ---------------------------------------------------------------

    def add(self, figure: Figure) -> Figure:
        self.figures[figure.key] = figure
        return figure

    def scenario(self, key: str, label: str, unit: str, run: Callable[[], Figure]) -> None:
        """Run one scenario; a failure becomes an empty figure with the error as its note."""
        started = time.monotonic()
        print(f"[bench] {label} ...", file=sys.stderr, flush=True)
        try:
            figure = run()
        except Exception as exc:
            traceback.print_exc()
            message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]
            self.errors.append(f"{label}: {message}")
            figure = self.add(Figure(key, label, None, unit, notes=f"FAILED: {message}"))
        shown = "-" if figure.value is None else f"{figure.value:,.1f} {figure.unit}"
        print(
            f"[bench]   {shown} ({time.monotonic() - started:.1f}s)",
            file=sys.stderr,
            flush=True,
        )
