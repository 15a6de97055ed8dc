"""sqla-scheduler benchmark: every figure beside its raw-SQL floor, measured in the same run.

Starts its own durable (fsync on) PostgreSQL cluster, runs the scenarios below against a
fresh database each, prints one table, and stops the cluster (and every worker process it
started) at the end, also on failure or Ctrl-C::

    python bench/run.py            # full run (a few minutes)
    python bench/run.py --quick    # smaller counts, for a smoke test
    python bench/run.py --json out.json

Scenarios: raw psycopg floors (drain, one INSERT per commit, executemany per commit); drain
of due no-op executions by worker processes (``bench/worker.py``); commit-to-start latency
of an idle worker; ``Scheduler.schedule`` one per transaction; ``Scheduler.schedule_batch``.
See ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from types import FrameType
from typing import Any

import psycopg
import sqlalchemy
from psycopg.types.json import Jsonb
from rich.console import Console
from rich.table import Table
from sqlalchemy import Engine, create_engine

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.results import Counts, Figure, ScenarioError, TableStats  # noqa: E402
from bench.workers import Worker, stop_all, stop_workers  # noqa: E402
from sqla_scheduler import ExecutionContext, OneTimeTask, Scheduler, migrate, one_time  # noqa: E402
from tests._postgres import PostgresCluster  # noqa: E402

TASK_NAME = "noop"  # the task bench/worker.py runs
TEMPLATE_DB = "bench_template"

INSERT_SQL = (
    "INSERT INTO scheduled_tasks"
    " (task_name, task_instance, task_data, execution_time, priority, schedule)"
    " VALUES (%s, %s, %s, %s, %s, NULL) ON CONFLICT DO NOTHING"
)
PICK_SQL = (
    "SELECT task_name, task_instance FROM scheduled_tasks"
    " WHERE picked = false AND execution_time <= now()"
    " ORDER BY priority DESC, execution_time LIMIT %s FOR UPDATE SKIP LOCKED"
)
DELETE_SQL = (
    "DELETE FROM scheduled_tasks WHERE (task_name, task_instance) IN"
    " (SELECT * FROM unnest(%s::varchar[], %s::varchar[]))"
)


#: Each library figure and the raw floor it is compared with.
FLOOR_OF = {
    "drain_async_1": "floor_drain",
    "drain_sync_1": "floor_drain",
    "drain_async_2": "floor_drain",
    "schedule": "floor_single",
    "schedule_batch": "floor_batch",
}
SCENARIOS = (
    "floor_drain",
    "floor_single",
    "floor_batch",
    "drain_async_1",
    "drain_sync_1",
    "drain_async_2",
    "latency",
    "schedule",
    "schedule_batch",
)


# --- the benchmark -----------------------------------------------------------------------


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _noop(ctx: ExecutionContext[Any]) -> None:
    """Never run here: the bench only schedules; workers run their own ``noop``."""


class Bench:
    def __init__(self, cluster: PostgresCluster, counts: Counts, polling_interval: float) -> None:
        self.cluster = cluster
        self.counts = counts
        self.polling_interval = polling_interval
        self.task: OneTimeTask[Any] = one_time(TASK_NAME)(_noop)
        self.figures: dict[str, Figure] = {}
        self.table_stats: list[TableStats] = []
        self.problems: list[str] = []
        self.errors: list[str] = []
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
                cur.executemany(INSERT_SQL, self._rows("warm", 100))
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

    # --- 1. floors ---------------------------------------------------------------

    def _rows(self, prefix: str, n: int) -> list[tuple[Any, ...]]:
        now = _now()
        return [(TASK_NAME, f"{prefix}{i:07d}", Jsonb(None), now, 0) for i in range(n)]

    def floor_drain(self) -> Figure:
        n, pick = self.counts.drain_rows, self.counts.drain_pick
        db = self.new_db("floor_drain")
        with self.connect(db) as conn:
            with conn.cursor() as cur:
                cur.executemany(INSERT_SQL, self._rows("d", n))
            conn.commit()
            if self.count(conn) != n:
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
        self.read_table_stats(db, "floor (a): raw drain, 1 connection", n)
        return self.add(
            Figure(
                "floor_drain",
                f"(a) raw drain: SELECT {pick} FOR UPDATE SKIP LOCKED + DELETE, 1 conn",
                n / elapsed,
                "rows/s",
                notes=f"{n:,} rows in {elapsed:.2f}s",
            )
        )

    def floor_single(self) -> Figure:
        n = self.counts.single_txns
        db = self.new_db("floor_single")
        with self.connect(db) as conn:
            conn.execute("SELECT 1")
            conn.commit()
            t0 = time.perf_counter()
            now = _now()
            with conn.cursor() as cur:
                for i in range(n):
                    cur.execute(INSERT_SQL, (TASK_NAME, f"s{i:07d}", Jsonb(None), now, 0))
                    conn.commit()
            elapsed = time.perf_counter() - t0
            if self.count(conn) != n:
                raise ScenarioError("floor single: rows missing")
        return self.add(
            Figure(
                "floor_single",
                "(b) raw INSERT, one row per transaction",
                n / elapsed,
                "inserts/s",
                notes=f"{n:,} commits in {elapsed:.2f}s",
            )
        )

    def floor_batch(self) -> Figure:
        txns, size = self.counts.batch_txns, self.counts.batch_size
        db = self.new_db("floor_batch")
        with self.connect(db) as conn:
            conn.execute("SELECT 1")
            conn.commit()
            t0 = time.perf_counter()
            with conn.cursor() as cur:
                for j in range(txns):
                    cur.executemany(INSERT_SQL, self._rows(f"b{j:03d}-", size))
                    conn.commit()
            elapsed = time.perf_counter() - t0
            if self.count(conn) != txns * size:
                raise ScenarioError("floor batch: rows missing")
        return self.add(
            Figure(
                "floor_batch",
                f"(c) raw executemany, {size:,} rows per transaction",
                txns * size / elapsed,
                "rows/s",
                notes=f"{txns} x {size:,} rows in {elapsed:.2f}s",
            )
        )

    # --- 2. drain by worker processes --------------------------------------------

    def drain(self, key: str, label: str, handler: str, processes: int) -> Figure:
        n = self.counts.drain_rows
        db = self.new_db(key)
        url = self.cluster.url(db)
        workers: list[Worker] = []
        engine = self.engine(db)
        problems: list[str] = []
        try:
            for i in range(processes):
                workers.append(
                    Worker(
                        url,
                        f"{key}-w{i}",
                        handler,
                        polling_interval=self.polling_interval,
                    )
                )
            for worker in workers:
                worker.wait_ready(60)
            client = Scheduler(engine, [self.task])
            instances = [self.task.instance(f"d{i:07d}") for i in range(n)]
            with engine.connect():
                pass  # open the pool's connection before the clock starts
            with self.connect(db, autocommit=True) as poll:
                inserted = client.schedule_batch(engine, instances)
                t0 = time.perf_counter()
                if inserted != n:
                    raise ScenarioError(f"schedule_batch inserted {inserted} of {n}")
                t_first: float | None = None
                last_left, last_progress = n, t0
                stall = 2 * self.polling_interval + 10
                while True:
                    left = self.count(poll)
                    now = time.perf_counter()
                    if left < n and t_first is None:
                        t_first = now
                    if left == 0:
                        t1 = now
                        break
                    if left < last_left:
                        last_left, last_progress = left, now
                    elif now - last_progress > stall:
                        dead = [w.name for w in workers if w.proc.poll() is not None]
                        raise ScenarioError(
                            f"no progress for {stall:.0f}s: {left:,} of {n:,} rows left"
                            f" after {now - t0:.1f}s; exited workers: {dead or 'none'}"
                        )
                    if now - t0 > 300:
                        raise ScenarioError(f"{left:,} of {n:,} rows left after 300s")
                    time.sleep(0.01)
        finally:
            problems = stop_workers(workers)
            engine.dispose()
            self.problems.extend(f"{label}: {p}" for p in problems)
        self.read_table_stats(db, label, n)
        elapsed = t1 - t0
        assert t_first is not None
        steady = n / (t1 - t_first) if t1 > t_first else float("nan")
        return self.add(
            Figure(
                key,
                label,
                n / elapsed,
                "rows/s",
                floor_key="floor_drain",
                notes=(
                    f"{n:,} rows in {elapsed:.2f}s; first row gone after "
                    f"{t_first - t0:.2f}s; {steady:,.0f} rows/s from then"
                ),
                extra={"elapsed_s": elapsed, "first_done_s": t_first - t0, "steady": steady},
            )
        )

    # --- 3. commit-to-start latency ----------------------------------------------

    def latency(self) -> list[Figure]:
        n, gap = self.counts.latency_runs, self.counts.latency_gap
        db = self.new_db("latency")
        url = self.cluster.url(db)
        engine = self.engine(db)
        worker = Worker(
            url,
            "latency-w0",
            "async",
            polling_interval=self.polling_interval,
            report_starts=True,
        )
        commits: dict[str, float] = {}
        try:
            worker.wait_ready(60)
            client = Scheduler(engine, [self.task])
            with engine.connect():
                pass
            time.sleep(0.5)  # let the worker's first (empty) poll finish
            begin = time.perf_counter()
            for i in range(n):
                instance = self.task.instance(f"l{i:05d}")
                if not client.schedule(engine, instance):
                    raise ScenarioError(f"schedule of {instance.instance_id} inserted nothing")
                commits[instance.instance_id] = time.time()
                pause = begin + (i + 1) * gap - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
            deadline = time.monotonic() + self.polling_interval + 15
            while time.monotonic() < deadline:
                with worker.starts_lock:
                    if len(worker.starts) >= n:
                        break
                time.sleep(0.02)
        finally:
            problems = stop_workers([worker])
            engine.dispose()
            self.problems.extend(f"latency: {p}" for p in problems)
        with worker.starts_lock:
            starts = dict(worker.starts)
        latencies = sorted((starts[k] - commits[k]) * 1000.0 for k in commits if k in starts)
        missing = n - len(latencies)
        if len(latencies) < 2:
            raise ScenarioError(f"only {len(latencies)} of {n} executions started")
        q = statistics.quantiles(latencies, n=100, method="inclusive")
        note = (
            f"{len(latencies)} of {n} started; min {latencies[0]:.2f} ms, "
            f"max {latencies[-1]:.2f} ms"
        )
        if missing:
            note += f"; {missing} never started"
            self.problems.append(f"latency: {missing} of {n} executions never started")
        figures = []
        for key, label, value, target, limit in (
            ("latency_p50", "commit-to-start latency p50", q[49], "<= 2 ms", 2.0),
            ("latency_p95", "commit-to-start latency p95", q[94], "", None),
            ("latency_p99", "commit-to-start latency p99", q[98], "<= 8 ms", 8.0),
        ):
            figures.append(
                self.add(
                    Figure(
                        key,
                        label,
                        value,
                        "ms",
                        target=target,
                        met=None if limit is None else value <= limit,
                        notes=note if key == "latency_p50" else "",
                        extra={"samples": len(latencies), "missing": missing},
                    )
                )
            )
        return figures

    # --- 4. / 5. scheduling ------------------------------------------------------

    def _time_scheduling(
        self, label: str, rows: int, work: Callable[[Scheduler, Engine], object]
    ) -> float:
        """Seconds ``work`` takes on a fresh database; fails unless it left ``rows`` rows."""
        db = self.new_db(label)
        engine = self.engine(db)
        try:
            client = Scheduler(engine, [self.task])
            with engine.connect():
                pass  # open the pool's connection before the clock starts
            t0 = time.perf_counter()
            work(client, engine)
            elapsed = time.perf_counter() - t0
        finally:
            engine.dispose()
        with self.connect(db) as conn:
            if self.count(conn) != rows:
                raise ScenarioError(f"{label}: rows missing")
        return elapsed

    def schedule_single(self) -> Figure:
        n = self.counts.single_txns

        def work(client: Scheduler, engine: Engine) -> None:
            for i in range(n):
                client.schedule(engine, self.task.instance(f"s{i:07d}"))

        elapsed = self._time_scheduling("schedule", n, work)
        return self.add(
            Figure(
                "schedule",
                "Scheduler.schedule(engine, instance), one per transaction",
                n / elapsed,
                "inserts/s",
                floor_key="floor_single",
                notes=f"{n:,} calls in {elapsed:.2f}s",
            )
        )

    def schedule_batch(self) -> Figure:
        txns, size = self.counts.batch_txns, self.counts.batch_size

        def work(client: Scheduler, engine: Engine) -> None:
            for j in range(txns):
                client.schedule_batch(
                    engine, [self.task.instance(f"b{j:03d}-{i:07d}") for i in range(size)]
                )

        elapsed = self._time_scheduling("schedule_batch", txns * size, work)
        return self.add(
            Figure(
                "schedule_batch",
                f"Scheduler.schedule_batch(engine, {size:,} instances)",
                txns * size / elapsed,
                "rows/s",
                floor_key="floor_batch",
                notes=f"{txns} x {size:,} rows in {elapsed:.2f}s",
            )
        )

    # --- all of it ---------------------------------------------------------------

    def run_all(self, only: Sequence[str] = ()) -> None:
        """Run every scenario, or those named in ``only`` and the floors they compare with."""
        self.prepare_template()
        wanted = set(only) | {FLOOR_OF[key] for key in only if key in FLOOR_OF}

        def s(key: str, label: str, unit: str, run: Callable[[], Figure], name: str = "") -> None:
            if not only or (name or key) in wanted:
                self.scenario(key, label, unit, run)

        s("floor_drain", "floor (a) drain", "rows/s", self.floor_drain)
        s("floor_single", "floor (b) single insert", "inserts/s", self.floor_single)
        s("floor_batch", "floor (c) executemany", "rows/s", self.floor_batch)
        for key, label, handler, processes in (
            ("drain_async_1", "drain: 1 process, async handlers", "async", 1),
            ("drain_sync_1", "drain: 1 process, sync handlers", "sync", 1),
            ("drain_async_2", "drain: 2 processes, async handlers", "async", 2),
        ):
            s(
                key,
                label,
                "rows/s",
                partial(self.drain, key, label, handler, processes),
            )
        s("latency_p50", "commit-to-start latency", "ms", lambda: self.latency()[0], "latency")
        s("schedule", "schedule, one per transaction", "inserts/s", self.schedule_single)
        s("schedule_batch", "schedule_batch", "rows/s", self.schedule_batch)
        self.apply_targets()

    def apply_targets(self) -> None:
        f = self.figures
        for key, floor_key in FLOOR_OF.items():
            if key in f and floor_key in f:
                f[key].floor_key = floor_key
                f[key].floor = f[floor_key].value
        for key, ratio in (
            ("drain_async_1", 0.35),
            ("drain_sync_1", 0.20),
            ("schedule", 0.70),
            ("schedule_batch", 1.00),
        ):
            if key in f:
                f[key].target = f">= {ratio:.0%} of floor"
                f[key].target_ratio = ratio
                r = f[key].ratio
                f[key].met = None if r is None else r >= ratio
        if "drain_async_2" in f:
            two = f["drain_async_2"]
            one = f.get("drain_async_1")
            two.target = "> 1 process async"
            if one is not None and one.value is not None and two.value is not None:
                two.met = two.value > one.value
                two.target += f" ({two.value / one.value:.2f}x)"


# --- output ------------------------------------------------------------------------------


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ms":
        return f"{value:,.2f} ms"
    return f"{value:,.0f} {unit}"


FLOOR_SHORT = {
    "floor_drain": "(a)",
    "floor_single": "(b)",
    "floor_batch": "(c)",
}


def render(console: Console, bench: Bench, meta: dict[str, Any]) -> None:
    table = Table(
        title=(
            f"sqla-scheduler benchmark ({'quick' if meta['quick'] else 'full'} run, "
            f"PostgreSQL {meta['postgres']}, fsync on, {meta['cpus']} CPUs)"
        ),
        title_justify="left",
    )
    table.add_column("Scenario")
    table.add_column("Figure", justify="right")
    table.add_column("Raw floor (same run)", justify="right")
    table.add_column("Ratio", justify="right")
    table.add_column("Target")
    table.add_column("Met", justify="center")
    table.add_column("Notes", overflow="fold")
    order = [
        "floor_drain",
        "floor_single",
        "floor_batch",
        "drain_async_1",
        "drain_sync_1",
        "drain_async_2",
        "latency_p50",
        "latency_p95",
        "latency_p99",
        "schedule",
        "schedule_batch",
    ]
    for key in order:
        fig = bench.figures.get(key)
        if fig is None:
            continue
        floor = (
            f"{_fmt(fig.floor, fig.unit)} {FLOOR_SHORT.get(fig.floor_key or '', '')}".strip()
            if fig.floor_key
            else ""
        )
        ratio = ""
        if fig.ratio is not None:
            ratio = f"{fig.ratio:.1%}" if fig.ratio < 0.1 else f"{fig.ratio:.0%}"
        met = {None: "", True: "[green]yes[/]", False: "[red]no[/]"}[fig.met]
        table.add_row(
            fig.label, _fmt(fig.value, fig.unit), floor, ratio, fig.target, met, fig.notes
        )
        if key in ("floor_batch", "drain_async_2", "latency_p99"):
            table.add_section()
    console.print(table)

    stats = Table(
        title="scheduled_tasks after each drain (pg_stat_user_tables)", title_justify="left"
    )
    for name in ("Run", "n_dead_tup", "n_tup_upd", "n_tup_hot_upd", "n_tup_del", "autovacuums"):
        stats.add_column(name, justify="left" if name == "Run" else "right")
    for st in bench.table_stats:
        cells = [st.n_dead_tup, st.n_tup_upd, st.n_tup_hot_upd, st.n_tup_del, st.autovacuum_count]
        run = st.run if st.settled else f"{st.run} (stats not settled)"
        stats.add_row(run, *("-" if c is None else f"{c:,}" for c in cells))
    console.print(stats)

    if bench.problems or bench.errors:
        console.print("[bold]Problems seen[/]")
        for line in bench.errors + bench.problems:
            console.print(f"  - {line}", markup=False, highlight=False)


def write_json(path: Path, bench: Bench, meta: dict[str, Any]) -> None:
    figures = []
    for fig in bench.figures.values():
        item = asdict(fig)
        item["ratio"] = fig.ratio
        figures.append(item)
    doc = {
        "meta": meta,
        "figures": figures,
        "table_stats": [asdict(st) for st in bench.table_stats],
        "problems": bench.problems,
        "errors": bench.errors,
    }
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")


def _git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "describe", "--always", "--dirty"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip()


def _source_fingerprint() -> str:
    """Hash of the library's sources, to notice code that changed during the run."""
    digest = hashlib.sha1()
    for path in sorted((ROOT / "sqla_scheduler").rglob("*.py")):
        digest.update(str(path.relative_to(ROOT)).encode())
        with contextlib.suppress(OSError):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


class _Terminated(BaseException):
    """SIGTERM arrived: unwind so the workers and the cluster are stopped."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise _Terminated(f"signal {signum}")


@contextlib.contextmanager
def _cleanup(cluster: PostgresCluster) -> Iterator[None]:
    try:
        yield
    finally:
        stop_all(5)
        cluster.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="sqla-scheduler benchmark")
    parser.add_argument("--quick", action="store_true", help="smaller counts (smoke test)")
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write figures as JSON")
    parser.add_argument(
        "--polling-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="workers' polling_interval (default 10: only wake-ups explain quick starts)",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=SCENARIOS,
        default=[],
        metavar="SCENARIO",
        help=(
            "run only this scenario and the floor it is compared with; repeatable "
            f"(one of: {', '.join(SCENARIOS)})"
        ),
    )
    args = parser.parse_args(argv)
    counts = Counts.quick() if args.quick else Counts()
    console = Console(width=None if sys.stdout.isatty() else 200)

    # Our own handler first: the cluster module then leaves SIGTERM alone, and a SIGTERM
    # unwinds through the finally blocks that stop workers and cluster.
    signal.signal(signal.SIGTERM, _on_sigterm)
    cluster = PostgresCluster(durable=True)
    started = time.monotonic()
    load_before = _load()
    revision, fingerprint = _git_revision(), _source_fingerprint()
    print("[bench] starting a durable PostgreSQL cluster ...", file=sys.stderr, flush=True)
    cluster.start()
    with _cleanup(cluster):
        with cluster.connect() as conn:
            row = conn.execute("SHOW server_version").fetchone()
            fsync = conn.execute("SHOW fsync").fetchone()
        assert row is not None
        assert fsync is not None
        if fsync[0] != "on":
            raise SystemExit("the benchmark cluster must run with fsync on")
        bench = Bench(cluster, counts, args.polling_interval)
        bench.run_all(args.only)
        if _source_fingerprint() != fingerprint:
            bench.problems.append(
                "sqla_scheduler sources changed during the run: the figures mix versions "
                f"(started at {revision}, sources {fingerprint}; ended at {_git_revision()}, "
                f"sources {_source_fingerprint()})"
            )
        meta = {
            "quick": args.quick,
            "postgres": row[0].split()[0],
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "sqlalchemy": sqlalchemy.__version__,
            "psycopg": psycopg.__version__,
            "revision": revision,
            "sources_sha1": fingerprint,
            "polling_interval_s": args.polling_interval,
            "counts": asdict(counts),
            "when": _now().isoformat(timespec="seconds"),
            "duration_s": round(time.monotonic() - started, 1),
            "loadavg_1m_before_after": [load_before, _load()],
        }
        render(console, bench, meta)
        console.print(
            f"revision {meta['revision']} (sources {fingerprint}), {meta['duration_s']}s; "
            f"workers polling_interval {args.polling_interval:g}s; 1-min load average "
            f"{load_before} before, {meta['loadavg_1m_before_after'][1]} after "
            f"(other processes on the box skew every figure)",
            highlight=False,
        )
        if args.json:
            write_json(args.json, bench, meta)
            console.print(f"figures written to {args.json}", highlight=False)
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
