"""The table every scheduler process shares.

One row per scheduled execution, keyed by ``(task_name, task_instance)``. The declarative
class [`ScheduledTask`][] is the persistence shape only; the library reads and writes it
through SQLAlchemy Core statements. Applications that use Alembic add [`metadata`][] to
their ``target_metadata`` so that autogenerate leaves the table alone.

A table under another name or schema is built with [`scheduled_tasks_table`][], and
[`metadata_for`][] gives a ``MetaData`` of its own holding it (for an application's
``target_metadata`` when its scheduler's tables have other names).
"""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    Index,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
    false,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped

from sqla_scheduler._dialects.columns import BIG_ID, TABLE_OPTIONS, TEXT
from sqla_scheduler._limits import (
    MAX_SCHEMA_NAME_LENGTH,
    MAX_TABLE_NAME_LENGTH,
    identifier_problem,
)
from sqla_scheduler._types import JSONOrNull, JSONPayload, UTCDateTime

__all__ = [
    "BIGINT_MAX",
    "DEFAULT_TABLE_NAME",
    "HISTORY_OUTCOMES",
    "INT_MAX",
    "MAX_INSTANCE_ID_LENGTH",
    "MAX_TASK_NAME_LENGTH",
    "ScheduledTask",
    "check_names",
    "groups_table",
    "history_table",
    "metadata",
    "metadata_for",
    "nodes_table",
    "paused_table",
    "rates_table",
    "record_table",
    "results_table",
    "scheduled_tasks_table",
    "stats_table",
    "table_for",
]

DEFAULT_TABLE_NAME = "scheduled_tasks"
MAX_TASK_NAME_LENGTH = 100
"""Longest task name the table holds."""
MAX_INSTANCE_ID_LENGTH = 255
"""Longest instance id the table holds."""
INT_MAX = 2**31 - 1
"""Largest ``consecutive_failures`` the table holds; the count stays there."""
BIGINT_MAX = 2**63 - 1
"""Largest ``version`` the table holds; the next version after it is 1."""
HISTORY_SUFFIX = "_history"
"""The history table is named after the scheduler's table with this suffix."""
NODES_SUFFIX = "_nodes"
"""The nodes table is named after the scheduler's table with this suffix."""
PAUSED_SUFFIX = "_paused"
"""The table of paused task names is named after the scheduler's table with this suffix."""
RESULTS_SUFFIX = "_results"
"""The table of kept results is named after the scheduler's table with this suffix."""
GROUPS_SUFFIX = "_groups"
"""The table of groups is named after the scheduler's table with this suffix."""
RATES_SUFFIX = "_rates"
"""The table of the starts counted against tasks' rate limits is named after the
scheduler's table with this suffix."""
STATS_SUFFIX = "_stats"
"""The table of per-minute counts of finished executions (the admin page's charts) is
named after the scheduler's table with this suffix."""
STATS_BOUNDS_MS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 60_000, 600_000)
"""The upper bounds, in milliseconds, of the stats table's histogram buckets of start lag
and duration: bucket ``i`` counts values under ``STATS_BOUNDS_MS[i]`` (and at least the
bound before it); the last bucket, ``len(STATS_BOUNDS_MS)``, counts the longer ones."""
STATS_BUCKETS = len(STATS_BOUNDS_MS) + 1
"""How many histogram buckets of each kind a stats row has."""
STATS_COLUMNS = (
    "executions",
    "lag_ms",
    "duration_ms",
    *(f"lag_{i}" for i in range(STATS_BUCKETS)),
    *(f"duration_{i}" for i in range(STATS_BUCKETS)),
)
"""The counting columns of a stats row, in order: ``executions``, the sums of start lag
and duration in milliseconds, then the histogram buckets ``lag_0`` ... and ``duration_0``
... (see ``STATS_BOUNDS_MS``)."""
RECORD_SUFFIX = "_schema"
"""The one-row table recording the migration step the tables are at is named after the
scheduler's table with this suffix."""
HISTORY_OUTCOMES = (
    "succeeded",
    "failed",
    "abandoned",
    "dead",
    "undecodable",
    "snoozed",
    "cancelled",
)
"""What a finished attempt can come to, as the history table spells it."""
DEAD_LETTER_OUTCOMES = ("abandoned", "undecodable")
"""The entries kept with their payload, to be scheduled again: executions that left the
scheduler's table without finishing (the admin's dead letters)."""

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

QUEUE_STORAGE: dict[str, str] = {
    "fillfactor": "90",
    "autovacuum_vacuum_scale_factor": "0.0",
    "autovacuum_vacuum_threshold": "5000",
    "autovacuum_vacuum_insert_scale_factor": "0.0",
    "autovacuum_vacuum_insert_threshold": "5000",
    "autovacuum_analyze_scale_factor": "0.02",
}
"""PostgreSQL storage parameters for a table that churns like a queue: room on each page
for HOT heartbeat updates, and autovacuum after a fixed number of dead rows.
"""

metadata = MetaData(naming_convention=NAMING_CONVENTION)
"""The scheduler's own metadata; add it to an Alembic ``target_metadata`` list."""


def scheduled_tasks_table(
    target: MetaData, name: str = DEFAULT_TABLE_NAME, schema: str | None = None
) -> Table:
    """Build the scheduler's table as ``name`` (in ``schema``) on ``target`` metadata,
    with its history (``<name>_history``), nodes (``<name>_nodes``), paused tasks
    (``<name>_paused``), kept results (``<name>_results``), groups (``<name>_groups``),
    rate-limited tasks' starts (``<name>_rates``) and per-minute counts of finished
    executions (``<name>_stats``) tables beside it, and the record of the migration step
    they are at (``<name>_schema``).

    The two partial indexes serve the hot queries. Unpicked rows by task, priority and
    time: a scheduler reads its own tasks' rows only, and within each task and priority
    the due ones in order (the picks) or the first one after now (what a scheduler sleeps
    until). Picked rows by scheduler: the dead-execution check. A third holds the
    members of groups by group (``group_id``), for cancelling a group; a row that
    ``awaits`` a group is its callback, kept at ``WAITING`` until the group finishes.
    ``last_heartbeat`` and ``version`` are in no index, so a heartbeat can be a HOT update.
    """
    table = Table(
        name,
        target,
        Column("task_name", String(MAX_TASK_NAME_LENGTH), primary_key=True),
        Column("task_instance", String(MAX_INSTANCE_ID_LENGTH), primary_key=True),
        Column("task_data", JSONPayload, nullable=True),
        Column("execution_time", UTCDateTime(), nullable=False),
        Column("picked", Boolean(), nullable=False, server_default=false()),
        Column("picked_by", String(255), nullable=True),
        Column("last_heartbeat", UTCDateTime(), nullable=True),
        Column("last_success", UTCDateTime(), nullable=True),
        Column("last_failure", UTCDateTime(), nullable=True),
        Column("consecutive_failures", Integer(), nullable=False, server_default=text("0")),
        Column("version", BigInteger(), nullable=False, server_default=text("1")),
        Column("priority", SmallInteger(), nullable=False, server_default=text("0")),
        Column("schedule", TEXT, nullable=True),
        Column("trace_context", JSONOrNull, nullable=True),
        Column("started_at", UTCDateTime(), nullable=True),
        Column("last_error", TEXT, nullable=True),
        Column("payload_version", SmallInteger(), nullable=False, server_default=text("1")),
        Column("group_id", BigInteger(), nullable=True),
        Column("awaits", BigInteger(), nullable=True),
        Column("snoozes", Integer(), nullable=False, server_default=text("0")),
        Column("progress", Double(), nullable=True),
        Column("progress_message", TEXT, nullable=True),
        Column("progress_at", UTCDateTime(), nullable=True),
        Column("stop_requested_at", UTCDateTime(), nullable=True),
        schema=schema,
        postgresql_with=QUEUE_STORAGE,
        **TABLE_OPTIONS,
    )
    unpicked = table.c.picked == false()
    picked = table.c.picked == true()
    Index(
        f"ix_{name}_due",
        table.c.task_name,
        table.c.priority.desc(),
        table.c.execution_time,
        postgresql_where=unpicked,
        sqlite_where=unpicked,
    )
    Index(f"ix_{name}_picked", table.c.picked_by, postgresql_where=picked, sqlite_where=picked)
    grouped = table.c.group_id.is_not(None)
    Index(f"ix_{name}_group", table.c.group_id, postgresql_where=grouped, sqlite_where=grouped)
    # The failing executions, latest failure first: the admin's failing list and section
    # read the first few without a pass over the table.
    failing = table.c.consecutive_failures > 0
    Index(
        f"ix_{name}_failing",
        table.c.last_failure.desc(),
        table.c.task_name,
        table.c.task_instance,
        postgresql_where=failing,
        sqlite_where=failing,
    )
    _history(target, name + HISTORY_SUFFIX, schema)
    _nodes(target, name + NODES_SUFFIX, schema)
    _paused(target, name + PAUSED_SUFFIX, schema)
    _results(target, name + RESULTS_SUFFIX, schema)
    _groups(target, name + GROUPS_SUFFIX, schema)
    _rates(target, name + RATES_SUFFIX, schema)
    _stats(target, name + STATS_SUFFIX, schema)
    _record(target, name + RECORD_SUFFIX, schema)
    return table


def _history(target: MetaData, name: str, schema: str | None) -> Table:
    """One entry per finished attempt, newest by ``id``; see ``HISTORY_OUTCOMES``.

    ``task_data`` is the payload's JSON text where the execution left the scheduler's table
    (abandoned, undecodable), so that it can be scheduled again exactly as it was, with
    the ``payload_version`` it was written with.
    ``finished_at`` is indexed for pruning, task and instance for filtered listings, and
    the dead letters (``DEAD_LETTER_OUTCOMES``) by outcome and task, for counting them.
    """
    table = _finished_entries(
        target,
        name,
        schema,
        Column("execution_time", UTCDateTime(), nullable=True),
        Column("started_at", UTCDateTime(), nullable=True),
        Column("finished_at", UTCDateTime(), nullable=False),
        Column("picked_by", String(255), nullable=True),
        Column("attempt", Integer(), nullable=False, server_default=text("1")),
        Column("error", TEXT, nullable=True),
        Column("task_data", TEXT, nullable=True),
        Column("priority", SmallInteger(), nullable=False, server_default=text("0")),
        Column("payload_version", SmallInteger(), nullable=False, server_default=text("1")),
    )
    dead = table.c.outcome.in_(DEAD_LETTER_OUTCOMES)
    Index(
        f"ix_{name}_dead_letters",
        table.c.outcome,
        table.c.task_name,
        postgresql_where=dead,
        sqlite_where=dead,
    )
    return table


def _finished_entries(
    target: MetaData, name: str, schema: str | None, *columns: Column[Any]
) -> Table:
    """A table of entries of finished executions, newest by ``id``: each one's task,
    instance and ``outcome``, then ``columns`` (``finished_at`` among them); indexed by
    ``finished_at`` for pruning, and by task and instance for listings and reads."""
    table = Table(
        name,
        target,
        Column("id", BIG_ID, primary_key=True),
        Column("task_name", String(MAX_TASK_NAME_LENGTH), nullable=False),
        Column("task_instance", String(MAX_INSTANCE_ID_LENGTH), nullable=False),
        Column("outcome", String(20), nullable=False),
        *columns,
        schema=schema,
        **TABLE_OPTIONS,
    )
    Index(f"ix_{name}_finished_at", table.c.finished_at)
    Index(f"ix_{name}_task", table.c.task_name, table.c.task_instance)
    return table


def _nodes(target: MetaData, name: str, schema: str | None) -> Table:
    """One row per running scheduler process, refreshed every ``node_heartbeat_interval``,
    which it records (``heartbeat_interval_ms``) so that any reader judges it by its own;
    null in a row written before the column was added."""
    return Table(
        name,
        target,
        Column("name", String(255), primary_key=True),
        Column("host", String(255), nullable=False),
        Column("pid", Integer(), nullable=False),
        Column("started_at", UTCDateTime(), nullable=False),
        Column("last_seen", UTCDateTime(), nullable=False),
        Column("concurrency", Integer(), nullable=False),
        Column("running", Integer(), nullable=False, server_default=text("0")),
        Column("version", String(50), nullable=False),
        Column("heartbeat_interval_ms", BigInteger(), nullable=True),
        schema=schema,
        **TABLE_OPTIONS,
    )


def _paused(target: MetaData, name: str, schema: str | None) -> Table:
    """One row per paused task name: no scheduler picks that task's executions."""
    return Table(
        name,
        target,
        Column("task_name", String(MAX_TASK_NAME_LENGTH), primary_key=True),
        Column("paused_at", UTCDateTime(), nullable=False),
        schema=schema,
        **TABLE_OPTIONS,
    )


def _results(target: MetaData, name: str, schema: str | None) -> Table:
    """One entry per finished execution of a task with ``keep_result``, or of a group's
    member (under its ``group_id``): its final ``outcome`` (``succeeded``, ``abandoned``,
    ``undecodable``, ``cancelled``), the JSON text of what its handler returned (``value``,
    on success) or the last ``error``, newest by ``id``. Task and instance are indexed for
    ``Scheduler.result``, ``finished_at`` for pruning after ``result_retention``, and
    ``group_id`` for a callback's ``ctx.group``."""
    table = _finished_entries(
        target,
        name,
        schema,
        Column("value", TEXT, nullable=True),
        Column("error", TEXT, nullable=True),
        Column("finished_at", UTCDateTime(), nullable=False),
        Column("group_id", BigInteger(), nullable=True),
    )
    Index(f"ix_{name}_group", table.c.group_id)
    return table


def _groups(target: MetaData, name: str, schema: str | None) -> Table:
    """One row per group of executions (``schedule_group``, a chain's links): its
    callback's key (null for a group without one), how many members it has and how many
    have not finished; the member that brings ``remaining`` to 0 makes the callback due.
    ``chain``: the group is a link of a chain, whose member cancelled before it ran
    cancels the callback (and the links after it) instead of making it due.
    Each finished member's outcome is kept in the results table under the group's id."""
    return Table(
        name,
        target,
        Column("id", BigInteger(), primary_key=True, autoincrement=False),
        Column("task_name", String(MAX_TASK_NAME_LENGTH), nullable=True),
        Column("task_instance", String(MAX_INSTANCE_ID_LENGTH), nullable=True),
        Column("total", Integer(), nullable=False),
        Column("remaining", Integer(), nullable=False),
        Column("created_at", UTCDateTime(), nullable=False),
        Column("finished_at", UTCDateTime(), nullable=True),
        Column("cancelled_at", UTCDateTime(), nullable=True),
        Column("chain", Boolean(), nullable=False, server_default=false()),
        schema=schema,
        **TABLE_OPTIONS,
    )


def _rates(target: MetaData, name: str, schema: str | None) -> Table:
    """The starts counted against each task's ``rate_limit``: one entry per pick that took
    any, ``starts`` of them, the latest by ``start_by``. A pick of the task sums those of
    the entries in its window, under the task's lock (see ``_store.rates``); entries out of
    every window are deleted a batch at a time. Indexed by task and time, with the count,
    so that the sum reads the index alone."""
    table = Table(
        name,
        target,
        Column("id", BIG_ID, primary_key=True),
        Column("task_name", String(MAX_TASK_NAME_LENGTH), nullable=False),
        Column("start_by", UTCDateTime(), nullable=False),
        Column("starts", Integer(), nullable=False),
        schema=schema,
        **TABLE_OPTIONS,
    )
    Index(f"ix_{name}_task", table.c.task_name, table.c.start_by, table.c.starts)
    return table


def _stats(target: MetaData, name: str, schema: str | None) -> Table:
    """What the executions finished in each minute came to, for the admin page's charts:
    one row per (``minute``: whole minutes since 1970-01-01 UTC, ``task_name``, ``node``:
    the ``scheduler_name`` of the process that counted them, ``outcome``), so that no two
    processes ever write the same row. ``executions`` counts them; ``lag_ms`` and
    ``duration_ms`` sum their start lags (from due to start) and durations, and the
    buckets ``lag_<i>`` and ``duration_<i>`` count them by size (``STATS_BOUNDS_MS``), for
    percentiles. An execution that never started (undecodable, spent) counts in
    ``executions`` alone. The key leads with the minute, for reading a time range; a
    second index by task and minute reads one task's."""
    counts = [
        Column(column, BigInteger() if column.endswith("_ms") else Integer(), nullable=False)
        for column in STATS_COLUMNS
    ]
    table = Table(
        name,
        target,
        Column("minute", BigInteger(), primary_key=True, autoincrement=False),
        Column("task_name", String(MAX_TASK_NAME_LENGTH), primary_key=True),
        Column("node", String(255), primary_key=True),
        Column("outcome", String(20), primary_key=True),
        *counts,
        schema=schema,
        **TABLE_OPTIONS,
    )
    Index(f"ix_{name}_task", table.c.task_name, table.c.minute)
    return table


def _record(target: MetaData, name: str, schema: str | None) -> Table:
    """One row: the migration step the tables are at, written by each step that runs."""
    return Table(
        name,
        target,
        Column("step", Integer(), primary_key=True, autoincrement=False),
        schema=schema,
        **TABLE_OPTIONS,
    )


def _beside(table: Table, suffix: str) -> Table:
    key = table.name + suffix if table.schema is None else f"{table.schema}.{table.name}{suffix}"
    return table.metadata.tables[key]


def history_table(table: Table) -> Table:
    """The history table that goes with the scheduler's ``table``."""
    return _beside(table, HISTORY_SUFFIX)


def nodes_table(table: Table) -> Table:
    """The nodes table that goes with the scheduler's ``table``."""
    return _beside(table, NODES_SUFFIX)


def paused_table(table: Table) -> Table:
    """The table of paused task names that goes with the scheduler's ``table``."""
    return _beside(table, PAUSED_SUFFIX)


def results_table(table: Table) -> Table:
    """The table of kept results that goes with the scheduler's ``table``."""
    return _beside(table, RESULTS_SUFFIX)


def groups_table(table: Table) -> Table:
    """The table of groups that goes with the scheduler's ``table``."""
    return _beside(table, GROUPS_SUFFIX)


def rates_table(table: Table) -> Table:
    """The table of the starts counted against rate limits that goes with the scheduler's
    ``table``."""
    return _beside(table, RATES_SUFFIX)


def stats_table(table: Table) -> Table:
    """The table of per-minute counts of finished executions that goes with the
    scheduler's ``table``."""
    return _beside(table, STATS_SUFFIX)


def record_table(table: Table) -> Table:
    """The table recording the migration step of the scheduler's ``table`` and those
    beside it."""
    return _beside(table, RECORD_SUFFIX)


def metadata_for(table_name: str = DEFAULT_TABLE_NAME, schema: str | None = None) -> MetaData:
    """The metadata of the scheduler's tables under ``table_name`` and ``schema``: for an
    application's Alembic ``target_metadata`` when they are not the default ones, so that
    autogenerate proposes nothing for them.

    ```python
    import sqla_scheduler.models

    target_metadata = [
        Base.metadata,
        sqla_scheduler.models.metadata_for(table_name="jobs", schema="queue"),
    ]
    ```

    The default name and schema give [`metadata`][]. A name that is not an identifier
    raises ``ValueError`` (see [`check_names`][]).
    """
    check_names(table_name, schema)
    return table_for(table_name, schema).metadata


def check_names(table_name: object, schema: object = None) -> None:
    """Raise ``ValueError``, naming the argument and its value, unless ``table_name`` is an
    identifier of at most 55 characters and ``schema`` is ``None`` or one of at most 63
    (so that every name derived from them fits PostgreSQL's identifiers), as
    ``SchedulerConfig`` requires them."""
    problem = identifier_problem(table_name, MAX_TABLE_NAME_LENGTH)
    if problem is not None:
        raise ValueError(f"table_name {problem}, got {table_name!r}")
    if schema is not None:
        problem = identifier_problem(schema, MAX_SCHEMA_NAME_LENGTH)
        if problem is not None:
            raise ValueError(f"schema {problem}, got {schema!r}")


@cache
def table_for(name: str = DEFAULT_TABLE_NAME, schema: str | None = None) -> Table:
    """The scheduler's table under ``name`` and ``schema``; one ``Table`` per pair.

    The default name and schema give the table of [`ScheduledTask`][] and
    [`metadata`][]; any other pair gets a table on a metadata of its own.
    """
    if name == DEFAULT_TABLE_NAME and schema is None:
        return ScheduledTask.__table__
    return scheduled_tasks_table(MetaData(naming_convention=NAMING_CONVENTION), name, schema)


class Base(DeclarativeBase):
    """Declarative base bound to the scheduler's [`metadata`][sqla_scheduler.models.metadata]."""

    metadata = metadata


class ScheduledTask(Base):
    """One scheduled execution: a row of the ``scheduled_tasks`` table."""

    __table__ = scheduled_tasks_table(metadata)

    task_name: Mapped[str]
    task_instance: Mapped[str]
    task_data: Mapped[Any]
    execution_time: Mapped[datetime]
    picked: Mapped[bool]
    picked_by: Mapped[str | None]
    last_heartbeat: Mapped[datetime | None]
    last_success: Mapped[datetime | None]
    last_failure: Mapped[datetime | None]
    consecutive_failures: Mapped[int]
    version: Mapped[int]
    priority: Mapped[int]
    schedule: Mapped[str | None]
    trace_context: Mapped[Any]
    started_at: Mapped[datetime | None]
    last_error: Mapped[str | None]
    payload_version: Mapped[int]
    group_id: Mapped[int | None]
    awaits: Mapped[int | None]
    snoozes: Mapped[int]
    progress: Mapped[float | None]
    progress_message: Mapped[str | None]
    progress_at: Mapped[datetime | None]
    stop_requested_at: Mapped[datetime | None]

    def __repr__(self) -> str:
        return f"<ScheduledTask {self.task_name}/{self.task_instance} at {self.execution_time}>"
