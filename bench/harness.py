"""What every scenario of one benchmark run shares: the database server (``Database``) and
its lifetime (``serving``), a fresh database per scenario copied from a migrated template,
connections and engines to it, and the figures, table statistics, problems, errors and
skipped scenarios the run records (``Bench``).

Also the no-op task both sides agree on (``TASK_NAME``, the one ``bench/worker.py`` runs).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from types import FrameType
from typing import Any

from sqlalchemy import Engine, create_engine

from bench.databases import TASK_NAME, Database, PostgreSQL, RawConnection
from bench.results import Counts, Figure, TableStats
from bench.workers import stop_all
from sqla_scheduler import ExecutionContext, OneTimeTask, one_time

__all__ = ["TASK_NAME", "Bench", "Terminated", "serving", "utc_now"]


class Terminated(BaseException):
    """SIGTERM arrived: unwind so the workers and the server are stopped."""


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"signal {signum}")


@contextlib.contextmanager
def serving(server: Database) -> Iterator[None]:
    """``server`` started, then stopped with every worker process still running, also on
    failure, Ctrl-C or SIGTERM."""
    # Our own handler first: the server modules then leave SIGTERM alone, and a SIGTERM
    # unwinds through the finally blocks that stop workers and server.
    signal.signal(signal.SIGTERM, _on_sigterm)
    print(f"[bench] starting a durable {server.title} server ...", file=sys.stderr, flush=True)
    server.start()
    try:
        yield
    finally:
        stop_all(5)
        server.stop()


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _noop(ctx: ExecutionContext[Any]) -> None:
    """Never run here: the bench only schedules; workers run their own ``noop``."""


class Bench:
    """One run: its database server and databases, and what the scenarios record."""

    def __init__(self, server: Database, counts: Counts, polling_interval: float) -> None:
        self.server = server
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
        #: The databases the scenario under way made (``settle`` drops them after it).
        self._made: list[str] = []

    # --- databases ---------------------------------------------------------------

    def prepare_template(self) -> None:
        self.server.create_template()

    def new_db(self, label: str) -> str:
        self._db_seq += 1
        db = self.server.copy_template(f"b{self._db_seq:02d}_{label}")
        self._made.append(db)
        return db

    @property
    def postgres(self) -> PostgreSQL:
        """The server, for the scenarios that run on PostgreSQL only."""
        assert isinstance(self.server, PostgreSQL), self.server.name
        return self.server

    def url(self, db: str, *, use_async: bool = False) -> str:
        return self.server.url(db, use_async=use_async)

    def connect(self, db: str, *, autocommit: bool = False) -> RawConnection:
        return self.server.connect(db, autocommit=autocommit)

    def engine(self, db: str) -> Engine:
        return create_engine(self.url(db))

    def rows(self, prefix: str, n: int) -> list[tuple[Any, ...]]:
        """``n`` due rows of the bench's task for the raw ``INSERT``."""
        return self.server.rows(prefix, n)

    def _scalar(self, conn: RawConnection, query: str, *params: Any) -> int:
        with conn.cursor() as cur:
            cur.execute(query, params or None)
            row = cur.fetchone()
        assert row is not None
        return int(row[0])

    def count(self, conn: RawConnection) -> int:
        return self._scalar(conn, "SELECT count(*) FROM scheduled_tasks")

    def count_due(self, conn: RawConnection) -> int:
        """The rows a drain drains (the bench's task, instances ``d...``), whatever else
        is there: a range of the primary key."""
        return self._scalar(
            conn,
            "SELECT count(*) FROM scheduled_tasks"
            " WHERE task_name = %s AND task_instance >= 'd' AND task_instance < 'e'",
            TASK_NAME,
        )

    def read_table_stats(self, db: str, run: str, expected_deletes: int) -> None:
        """The table's statistics after a drain, where the database keeps them."""
        stats = self.server.table_stats(db, run, expected_deletes)
        if stats is not None:
            self.table_stats.append(stats)

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
        finally:
            # each scenario starts on a quiet server, whatever the one before it wrote
            made, self._made = self._made, []
            self.server.settle(made)
        shown = "-" if figure.value is None else f"{figure.value:,.1f} {figure.unit}"
        print(
            f"[bench]   {shown} ({time.monotonic() - started:.1f}s)",
            file=sys.stderr,
            flush=True,
        )

    def skip(self, key: str, label: str, unit: str, reason: str) -> None:
        """A scenario that does not run on this database: a row saying why."""
        print(f"[bench] {label}: skipped ({reason})", file=sys.stderr, flush=True)
        note = f"skipped on {self.server.title}: {reason}"
        self.add(Figure(key, label, None, unit, notes=note, extra={"skipped": reason}))
