"""Random poison rows, written by raw SQL within each column's database type, beside good
rows: the good rows all run, exactly once, and picks, revivals, maintenance and listings
go on (issue 13, property tests).

On PostgreSQL a value of the column's own type (a timestamp in 4713 BC, a version at
bigint's limit, any JSON, JSON nested 3,000 deep); on MariaDB likewise within its types
(a zero date, a ``picked`` of 7, any text as the payload); on SQLite, whose columns hold
any value, anything SQLite stores: integers, reals, text, blobs and NULLs.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, text

from sqla_scheduler import ManualClock, one_time
from tests.support import NOW, Harness, services
from tests.support.strategies import json_values, storable_text

pytestmark = pytest.mark.anyio

GOOD = [f"ok-{i}" for i in range(10)]

#: The columns a poison row may spoil (not its key), with their PostgreSQL types.
POSTGRES_TYPES = {
    "task_data": "jsonb",
    "execution_time": "timestamptz",
    "picked": "boolean",
    "picked_by": "text",
    "last_heartbeat": "timestamptz",
    "last_success": "timestamptz",
    "last_failure": "timestamptz",
    "consecutive_failures": "integer",
    "version": "bigint",
    "priority": "smallint",
    "schedule": "text",
    "trace_context": "jsonb",
    "started_at": "timestamptz",
}
NOT_NULL = {"execution_time", "picked", "consecutive_failures", "version", "priority"}

# Any JSON, and JSON the databases accept that Python cannot load: nested past the
# recursion limit, an integer longer than int() parses from text.
json_text = json_values(max_leaves=8).map(json.dumps) | st.sampled_from(
    ["[" * 3000 + "]" * 3000, "1" + "0" * 5000]
)
# Years PostgreSQL's timestamptz holds: 4713 BC to 294276 AD.
year = st.one_of(
    st.tuples(
        st.sampled_from([1, 2, 2029, 2030, 9999, 10000]) | st.integers(1, 294275), st.just("")
    ),
    st.tuples(st.integers(1, 4713), st.just(" BC")),
)
timestamp_text = st.builds(
    lambda year, month, day, hour: (
        f"{year[0]:04d}-{month:02d}-{day:02d} {hour:02d}:00:00+00{year[1]}"
    ),
    year,
    st.integers(1, 12),
    st.integers(1, 28),
    st.integers(0, 23),
)
POSTGRES_VALUES: dict[str, Any] = {
    "jsonb": json_text,
    "timestamptz": timestamp_text,
    "boolean": st.sampled_from(["true", "false"]),
    "text": storable_text,
    "integer": st.integers(-(2**31), 2**31 - 1).map(str),
    "bigint": st.integers(-(2**63), 2**63 - 1).map(str),
    "smallint": st.integers(-(2**15), 2**15 - 1).map(str),
}
# MariaDB's DATETIME: years 1-9999 (1000-9999 supported), and the zero date its default
# sql_mode lets a person write
mariadb_timestamp = st.sampled_from(["0000-00-00 00:00:00"]) | st.builds(
    lambda year, month, day: f"{year:04d}-{month:02d}-{day:02d} 12:00:00.5",
    st.sampled_from([1, 2, 999, 1000, 2029, 2030, 9999]) | st.integers(1, 9999),
    st.integers(1, 12),
    st.integers(1, 28),
)
MARIADB_VALUES: dict[str, Any] = {
    **POSTGRES_VALUES,
    # the payload is text there; the trace context JSON that MariaDB's check passes
    "jsonb": json_text | storable_text,
    "timestamptz": mariadb_timestamp,
    "boolean": st.integers(-128, 127).map(str),  # a TINYINT(1)
    "text": storable_text.map(lambda text: text[:255]),
}
MARIADB_TRACE = json_values(max_leaves=8).map(json.dumps)
sqlite_value = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(st.characters(blacklist_categories=("Cs",))),
    st.binary(max_size=8),
    timestamp_text.map(lambda t: t.removesuffix("+00").removesuffix(" BC")),
    json_text,
)


@st.composite
def poison(draw: st.DrawFn) -> dict[str, dict[str, Any]]:
    """The spoiled columns of one poison row and their raw values on each database
    (``None``: NULL)."""
    columns = draw(st.lists(st.sampled_from(sorted(POSTGRES_TYPES)), min_size=1, max_size=3))
    spoiled: dict[str, dict[str, Any]] = {}
    for column in columns:
        kind = POSTGRES_TYPES[column]
        values = {
            "postgresql": POSTGRES_VALUES[kind],
            "mariadb": MARIADB_TRACE if column == "trace_context" else MARIADB_VALUES[kind],
            "sqlite": sqlite_value,
        }
        spoiled[column] = {
            database: draw(value if column in NOT_NULL else st.none() | value)
            for database, value in values.items()
        }
    return spoiled


def spoil(db: Harness, instance: str, column: str, value: Any) -> None:
    if db.is_sqlite or db.is_mariadb:
        sql = f"update scheduled_tasks set {column} = :v where task_instance = :i"
    else:
        cast = POSTGRES_TYPES[column]
        sql = f"update scheduled_tasks set {column} = cast(:v as {cast}) where task_instance = :i"
    with db.sync_engine.begin() as conn:
        conn.execute(text(sql), {"v": value, "i": instance})


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(rows=st.lists(poison(), min_size=1, max_size=4))
async def test_good_rows_run_beside_random_poison_rows(
    db: Harness, rows: list[dict[str, dict[str, Any]]]
) -> None:
    with db.sync_engine.begin() as conn:
        conn.execute(delete(db.table))
    ran: list[str] = []
    task = one_time("job")(lambda ctx: ran.append(ctx.instance_id))
    clock = ManualClock(NOW)
    scheduler = db.scheduler([task], clock)
    bad = [f"bad-{i}" for i in range(len(rows))]
    due = NOW - timedelta(minutes=1)
    instances = [task.instance(i, at=due) for i in GOOD + bad]
    await db.resolve(scheduler.schedule_batch(db.engine, instances))
    for instance, spoiled in zip(bad, rows, strict=True):
        database = "sqlite" if db.is_sqlite else "mariadb" if db.is_mariadb else "postgresql"
        for column, values in spoiled.items():
            spoil(db, instance, column, values[database])

    await db.resolve(scheduler.executions(db.engine))
    async with services(scheduler) as runner:
        await runner.maintenance.run_once()
    await scheduler.run_due()
    assert sorted(i for i in ran if i.startswith("ok-")) == sorted(GOOD)
    clock.advance(timedelta(days=1))
    await scheduler.revive_dead_executions()
    await scheduler.run_due()
    await db.resolve(scheduler.executions(db.engine))
    assert sorted(i for i in ran if i.startswith("ok-")) == sorted(GOOD), "each ran once"
