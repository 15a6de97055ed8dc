"""Scheduling: ``schedule`` on an ``Engine`` (one execution per transaction), awaited on
an ``AsyncEngine``, many times inside one ``Session`` transaction (the statement's own
cost), and ``schedule_batch``.

Each is interleaved with its raw floor on the same database, in rounds (raw, then the
library, then raw again), so that both sides meet the same disk: with fsync on, the cost
of a commit moves by half from one second to the next on a shared machine, and figures
taken a few seconds apart compare the disk's moods, not the code.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from typing import Any, Literal

import psycopg
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.orm import Session

from bench.databases import PostgreSQL
from bench.harness import Bench
from bench.results import Figure, ScenarioError
from sqla_scheduler import Scheduler

ROUNDS = 4


class _Sides:
    """Seconds spent by each side, raw and library, over the rounds: each round times
    its raw part, then its library part, in ``timed`` blocks."""

    def __init__(self, rounds: int = ROUNDS) -> None:
        self.rounds = rounds
        self.raw = 0.0
        self.library = 0.0

    @contextlib.contextmanager
    def timed(self, side: Literal["raw", "library"]) -> Iterator[None]:
        """Add the time the block takes to ``side``'s."""
        start = time.perf_counter()
        yield
        setattr(self, side, getattr(self, side) + time.perf_counter() - start)

    def figure(
        self,
        bench: Bench,
        key: str,
        label: str,
        rows: int,
        floor_label: str,
        notes: str,
        unit: str = "inserts/s",
    ) -> Figure:
        return bench.add(
            Figure(
                key,
                label,
                rows / self.library,
                unit,
                floor=rows / self.raw,
                floor_key=floor_label,
                notes=f"{rows:,} rows {notes}; {self.rounds} rounds, each after the floor's",
            )
        )


def _raw_insert(bench: Bench, cur: Any, instance_id: str) -> None:
    cur.execute(bench.server.insert_sql, bench.server.row(instance_id))


def _check_rows(bench: Bench, db: str, expected: int) -> None:
    with bench.connect(db) as conn:
        if bench.count(conn) != expected:
            raise ScenarioError(f"{db}: rows missing")


def schedule_engine(bench: Bench) -> Figure:
    """``Scheduler.schedule(engine, instance)`` against one INSERT per commit."""
    per = bench.counts.single_txns // ROUNDS
    db = bench.new_db("schedule")
    engine = bench.engine(db)
    sides = _Sides()
    try:
        client = Scheduler(engine, [bench.task])
        with engine.connect(), bench.connect(db) as raw, raw.cursor() as cur:
            for r in range(ROUNDS):
                with sides.timed("raw"):
                    for i in range(per):
                        _raw_insert(bench, cur, f"r{r}-{i:06d}")
                        raw.commit()
                with sides.timed("library"):
                    for i in range(per):
                        client.schedule(engine, bench.task.instance(f"s{r}-{i:06d}"))
    finally:
        engine.dispose()
    _check_rows(bench, db, 2 * per * ROUNDS)
    return sides.figure(
        bench,
        "schedule",
        "Scheduler.schedule(engine, instance), one per transaction",
        per * ROUNDS,
        "interleaved_single",
        "(one commit each)",
    )


def schedule_async(bench: Bench) -> Figure:
    """``await Scheduler.schedule(async_engine, instance)`` against one INSERT per commit:
    on PostgreSQL the floor is psycopg's ``AsyncConnection`` (what an async caller's
    driver does for one call), with the synchronous floor timed in the same rounds and
    given in the notes; elsewhere the synchronous floor."""
    per = bench.counts.single_txns // ROUNDS
    db = bench.new_db("schedule_async")
    sides = _Sides()
    sync_floor = _Sides()
    on_postgresql = isinstance(bench.server, PostgreSQL)

    async def rounds() -> None:
        engine = create_async_engine(bench.url(db, use_async=True))
        araw = (
            await psycopg.AsyncConnection.connect(bench.server.cluster.dsn(db))
            if isinstance(bench.server, PostgreSQL)
            else None
        )
        try:
            client = Scheduler(engine, [bench.task])
            async with engine.connect():
                pass  # open the pool's connection before the clock starts
            with bench.connect(db) as raw, raw.cursor() as cur:
                for r in range(ROUNDS):
                    with (sync_floor if araw is not None else sides).timed("raw"):
                        for i in range(per):
                            _raw_insert(bench, cur, f"r{r}-{i:06d}")
                            raw.commit()
                    if araw is not None:
                        with sides.timed("raw"):
                            for i in range(per):
                                row = bench.server.row(f"a{r}-{i:06d}")
                                await araw.execute(bench.server.insert_sql, row)
                                await araw.commit()
                    with sides.timed("library"):
                        for i in range(per):
                            await client.schedule(engine, bench.task.instance(f"s{r}-{i:06d}"))
        finally:
            if araw is not None:
                await araw.close()
            await engine.dispose()

    asyncio.run(rounds())
    _check_rows(bench, db, (3 if on_postgresql else 2) * per * ROUNDS)
    rows = per * ROUNDS
    if not on_postgresql:
        return sides.figure(
            bench,
            "schedule_async",
            "await Scheduler.schedule(async_engine, instance), one per transaction",
            rows,
            "interleaved_single",
            "(one commit each)",
        )
    bench.add(
        Figure(
            "floor_single_async",
            "raw floor: one INSERT per commit, psycopg AsyncConnection",
            rows / sides.raw,
            "inserts/s",
            notes=(
                f"{rows / sides.raw / (rows / sync_floor.raw):.0%} of the synchronous floor "
                f"in the same rounds ({rows / sync_floor.raw:,.0f} inserts/s)"
            ),
        )
    )
    return sides.figure(
        bench,
        "schedule_async",
        "await Scheduler.schedule(async_engine, instance), one per transaction",
        rows,
        "floor_single_async",
        (
            f"(one commit each; {rows / sides.library / (rows / sync_floor.raw):.0%} of the "
            f"synchronous floor, {rows / sync_floor.raw:,.0f} inserts/s)"
        ),
    )


def schedule_session(bench: Bench) -> Figure:
    """``Scheduler.schedule(session, instance)`` many times in one ``Session`` transaction
    against as many INSERT statements in one transaction."""
    per = bench.counts.single_txns // ROUNDS
    db = bench.new_db("schedule_session")
    engine = bench.engine(db)
    sides = _Sides()
    try:
        client = Scheduler(engine, [bench.task])
        with engine.connect(), bench.connect(db) as raw, raw.cursor() as cur:
            for r in range(ROUNDS):
                with sides.timed("raw"):
                    for i in range(per):
                        _raw_insert(bench, cur, f"r{r}-{i:06d}")
                    raw.commit()
                with sides.timed("library"), Session(engine) as session, session.begin():
                    for i in range(per):
                        client.schedule(session, bench.task.instance(f"s{r}-{i:06d}"))
    finally:
        engine.dispose()
    _check_rows(bench, db, 2 * per * ROUNDS)
    return sides.figure(
        bench,
        "schedule_session",
        "Scheduler.schedule(session, instance), all in one transaction",
        per * ROUNDS,
        "interleaved_statements",
        f"({per:,} in each transaction)",
    )


def schedule_batch(bench: Bench) -> Figure:
    """``Scheduler.schedule_batch(engine, instances)`` against ``executemany`` of as many
    rows, each batch its own transaction."""
    txns, size = bench.counts.batch_txns, bench.counts.batch_size
    db = bench.new_db("schedule_batch")
    engine = bench.engine(db)
    sides = _Sides(txns)
    try:
        client = Scheduler(engine, [bench.task])
        with engine.connect(), bench.connect(db) as raw, raw.cursor() as cur:
            for r in range(txns):
                with sides.timed("raw"):
                    cur.executemany(bench.server.insert_sql, bench.rows(f"r{r:03d}-", size))
                    raw.commit()
                with sides.timed("library"):
                    batch = [bench.task.instance(f"b{r:03d}-{i:07d}") for i in range(size)]
                    if client.schedule_batch(engine, batch) != size:
                        raise ScenarioError("schedule_batch inserted fewer than asked")
    finally:
        engine.dispose()
    _check_rows(bench, db, 2 * txns * size)
    return sides.figure(
        bench,
        "schedule_batch",
        f"Scheduler.schedule_batch(engine, {size:,} instances)",
        txns * size,
        "interleaved_batch",
        f"({size:,} in each transaction)",
        unit="rows/s",
    )
