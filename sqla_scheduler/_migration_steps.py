"""The scheduler's schema changes, as one ordered list of numbered steps.

Step N is what revision 000N of the ``sqla_scheduler`` branch does. Each step's
``upgrade`` and ``downgrade`` take Alembic's ``op`` and the [`Names`][] of the tables, so
that the same DDL serves every way of migrating: the branch's revisions (and through them
``sqla-scheduler db upgrade``) call [`run`][] with the default names, an application's own
revisions call it through ``sqla_scheduler.alembic`` with any name and schema.

[`run`][] also records the step the tables are at, in a one-row table beside them
(``<table>_schema``, one integer ``step``), created by the first step that runs and
dropped with the tables when a downgrade reaches step 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import TypeAlias

import sqlalchemy as sa
from alembic.operations import Operations
from sqlalchemy.schema import CreateTable, DropTable

from sqla_scheduler._dialects import Backend, known_backend
from sqla_scheduler._dialects.columns import (
    BIG_ID,
    JSON_COLUMN,
    PAYLOAD_COLUMN,
    TABLE_OPTIONS,
    TEXT,
    TIMESTAMP,
)
from sqla_scheduler._types import UTCDateTime
from sqla_scheduler.models import (
    DEFAULT_TABLE_NAME,
    GROUPS_SUFFIX,
    HISTORY_SUFFIX,
    NODES_SUFFIX,
    PAUSED_SUFFIX,
    RATES_SUFFIX,
    RECORD_SUFFIX,
    RESULTS_SUFFIX,
    STATS_SUFFIX,
    record_table,
    table_for,
)

__all__ = [
    "APP_VERSION_TABLE",
    "DEFAULT_NAMES",
    "LATEST",
    "STANDALONE_VERSION_TABLE",
    "STEPS",
    "Names",
    "Op",
    "Step",
    "record",
    "run",
]

STANDALONE_VERSION_TABLE = "sqla_scheduler_alembic_version"
"""The version table of ``sqla-scheduler db upgrade`` (``migrate.VERSION_TABLE``)."""

APP_VERSION_TABLE = "alembic_version"
"""Alembic's default version table: an application's own project's."""

Op: TypeAlias = "Operations | ModuleType"
"""What a revision hands over: Alembic's ``op`` module (the proxy of the running
``Operations``), or an ``Operations`` itself."""


class _Suffixed:
    """A name ``Names`` derives from its ``table``: the table's name with ``suffix``
    (``names.history`` is ``names.table + HISTORY_SUFFIX``)."""

    def __init__(self, suffix: str) -> None:
        self.suffix = suffix

    def __get__(self, names: Names, owner: type[Names]) -> str:
        return names.table + self.suffix


@dataclass(frozen=True, slots=True, kw_only=True)
class Names:
    """The names the steps give the scheduler's tables, derived from ``table`` as
    ``models.scheduled_tasks_table`` derives them, all in ``schema``."""

    table: str = DEFAULT_TABLE_NAME
    schema: str | None = None

    history = _Suffixed(HISTORY_SUFFIX)
    nodes = _Suffixed(NODES_SUFFIX)
    paused = _Suffixed(PAUSED_SUFFIX)
    results = _Suffixed(RESULTS_SUFFIX)
    groups = _Suffixed(GROUPS_SUFFIX)
    rates = _Suffixed(RATES_SUFFIX)
    stats = _Suffixed(STATS_SUFFIX)
    record = _Suffixed(RECORD_SUFFIX)

    def quoted(self, op: Op, name: str) -> str:
        """``name`` in ``schema`` as the dialect writes it in raw SQL (the default names
        need no quotes)."""
        preparer = op.get_context().dialect.identifier_preparer
        if self.schema is None:
            return preparer.quote(name)
        return f"{preparer.quote_schema(self.schema)}.{preparer.quote(name)}"


DEFAULT_NAMES = Names()


def _backend(op: Op) -> Backend | None:
    # The context's dialect, not op.get_bind()'s: there is no connection in --sql mode.
    return known_backend(op.get_context().dialect)


def _stores_table_settings(op: Op) -> bool:
    backend = _backend(op)
    return backend is not None and backend.table_storage_settings


def _keeps_json_as_text(op: Op) -> bool:
    """SQLite: a column declared ``JSON`` has numeric affinity (``_dialects.columns.JSONText``).
    MariaDB's ``JSON`` is text already."""
    backend = _backend(op)
    return backend is not None and backend.json_storage == "text" and not backend.typed_columns


# 1 (5d7c3a1f0b42): the scheduler's table.


def _create_table_up(op: Op, names: Names) -> None:
    table = names.table
    op.create_table(
        table,
        sa.Column("task_name", sa.String(100), nullable=False),
        sa.Column("task_instance", sa.String(255), nullable=False),
        sa.Column("task_data", PAYLOAD_COLUMN),
        sa.Column("execution_time", TIMESTAMP, nullable=False),
        sa.Column("picked", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("picked_by", sa.String(255)),
        sa.Column("last_heartbeat", TIMESTAMP),
        sa.Column("last_success", TIMESTAMP),
        sa.Column("last_failure", TIMESTAMP),
        sa.Column(
            "consecutive_failures", sa.Integer(), server_default=sa.text("0"), nullable=False
        ),
        sa.Column("version", sa.BigInteger(), server_default=sa.text("1"), nullable=False),
        sa.Column("priority", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("schedule", TEXT),
        sa.PrimaryKeyConstraint("task_name", "task_instance", name=f"pk_{table}"),
        schema=names.schema,
        **TABLE_OPTIONS,
    )
    op.create_index(
        f"ix_{table}_due",
        table,
        [sa.text("priority DESC"), "execution_time"],
        schema=names.schema,
        postgresql_where=sa.text("picked = false"),
        sqlite_where=sa.text("picked = 0"),
    )
    op.create_index(
        f"ix_{table}_picked",
        table,
        ["picked_by"],
        schema=names.schema,
        postgresql_where=sa.text("picked = true"),
        sqlite_where=sa.text("picked = 1"),
    )


def _create_table_down(op: Op, names: Names) -> None:
    table = names.table
    op.drop_index(f"ix_{table}_picked", table_name=table, schema=names.schema)
    op.drop_index(f"ix_{table}_due", table_name=table, schema=names.schema)
    op.drop_table(table, schema=names.schema)


# 2 (8e41b7c9d2a3): storage settings for a table that churns like a queue (PostgreSQL).

_STORAGE_SETTINGS = (
    "fillfactor = 90, "
    "autovacuum_vacuum_scale_factor = 0.0, "
    "autovacuum_vacuum_threshold = 5000, "
    "autovacuum_vacuum_insert_scale_factor = 0.0, "
    "autovacuum_vacuum_insert_threshold = 5000, "
    "autovacuum_analyze_scale_factor = 0.02"
)
_STORAGE_NAMES = (
    "fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, "
    "autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold, "
    "autovacuum_analyze_scale_factor"
)


def _storage_up(op: Op, names: Names) -> None:
    if _stores_table_settings(op):
        op.execute(f"ALTER TABLE {names.quoted(op, names.table)} SET ({_STORAGE_SETTINGS})")


def _storage_down(op: Op, names: Names) -> None:
    if _stores_table_settings(op):
        op.execute(f"ALTER TABLE {names.quoted(op, names.table)} RESET ({_STORAGE_NAMES})")


# 3 (c3f9a6e1d7b5): the trace context.


def _trace_context_up(op: Op, names: Names) -> None:
    op.add_column(
        names.table,
        sa.Column(
            "trace_context",
            JSON_COLUMN,
            nullable=True,
        ),
        schema=names.schema,
    )


def _trace_context_down(op: Op, names: Names) -> None:
    with op.batch_alter_table(names.table, schema=names.schema) as batch:
        batch.drop_column("trace_context")


# 4 (d81f2b6a9c30): when the handler of a picked execution started.


def _started_at_up(op: Op, names: Names) -> None:
    op.add_column(
        names.table,
        sa.Column("started_at", TIMESTAMP, nullable=True),
        schema=names.schema,
    )


def _started_at_down(op: Op, names: Names) -> None:
    with op.batch_alter_table(names.table, schema=names.schema) as batch:
        batch.drop_column("started_at")


# 5 (e5a0c4b8f1d2): SQLite's payload column declared TEXT.


def _payload_text_up(op: Op, names: Names) -> None:
    if not _keeps_json_as_text(op):
        return
    with op.batch_alter_table(names.table, schema=names.schema) as batch:
        batch.alter_column("task_data", type_=sa.Text(), existing_type=sa.JSON())
    # The rebuild's CAST wrote an infinite real as 'Inf', which is not JSON.
    op.execute(
        f"UPDATE {names.quoted(op, names.table)} SET task_data = CASE task_data "
        "WHEN 'Inf' THEN '1e999' ELSE '-1e999' END WHERE task_data IN ('Inf', '-Inf')"
    )


def _payload_text_down(op: Op, names: Names) -> None:
    if not _keeps_json_as_text(op):
        return
    with op.batch_alter_table(names.table, schema=names.schema) as batch:
        batch.alter_column("task_data", type_=sa.JSON(), existing_type=sa.Text())


# 6 (f7b2d9e4a6c1): the due index led by the task name.


def _due_index(op: Op, names: Names, *columns: str | sa.TextClause) -> None:
    op.create_index(
        f"ix_{names.table}_due",
        names.table,
        list(columns),
        schema=names.schema,
        postgresql_where=sa.text("picked = false"),
        sqlite_where=sa.text("picked = 0"),
    )


def _due_by_task_up(op: Op, names: Names) -> None:
    op.drop_index(f"ix_{names.table}_due", table_name=names.table, schema=names.schema)
    _due_index(op, names, "task_name", sa.text("priority DESC"), "execution_time")


def _due_by_task_down(op: Op, names: Names) -> None:
    op.drop_index(f"ix_{names.table}_due", table_name=names.table, schema=names.schema)
    _due_index(op, names, sa.text("priority DESC"), "execution_time")


# 7 (626b08d7d8ec): the error of an execution's last failed attempt.


def _last_error_up(op: Op, names: Names) -> None:
    op.add_column(names.table, sa.Column("last_error", TEXT, nullable=True), schema=names.schema)


def _last_error_down(op: Op, names: Names) -> None:
    with op.batch_alter_table(names.table, schema=names.schema) as batch:
        batch.drop_column("last_error")


# 8 (3a9c5e7b1d20): the history and nodes tables.


def _history_and_nodes_up(op: Op, names: Names) -> None:
    history, nodes = names.history, names.nodes
    op.create_table(
        history,
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("task_name", sa.String(100), nullable=False),
        sa.Column("task_instance", sa.String(255), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("execution_time", UTCDateTime(), nullable=True),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=False),
        sa.Column("picked_by", sa.String(255), nullable=True),
        sa.Column("attempt", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("error", TEXT, nullable=True),
        sa.Column("task_data", TEXT, nullable=True),
        sa.Column("priority", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{history}")),
        schema=names.schema,
        **TABLE_OPTIONS,
    )
    op.create_index(f"ix_{history}_finished_at", history, ["finished_at"], schema=names.schema)
    op.create_index(
        f"ix_{history}_task", history, ["task_name", "task_instance"], schema=names.schema
    )
    op.create_table(
        nodes,
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("last_seen", UTCDateTime(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("running", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("version", sa.String(50), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f(f"pk_{nodes}")),
        schema=names.schema,
        **TABLE_OPTIONS,
    )


def _history_and_nodes_down(op: Op, names: Names) -> None:
    history = names.history
    op.drop_table(names.nodes, schema=names.schema)
    op.drop_index(f"ix_{history}_task", table_name=history, schema=names.schema)
    op.drop_index(f"ix_{history}_finished_at", table_name=history, schema=names.schema)
    op.drop_table(history, schema=names.schema)


# 9 (b8d2f4a61c37): paused tasks.


def _paused_up(op: Op, names: Names) -> None:
    op.create_table(
        names.paused,
        sa.Column("task_name", sa.String(100), nullable=False),
        sa.Column("paused_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("task_name", name=op.f(f"pk_{names.paused}")),
        schema=names.schema,
        **TABLE_OPTIONS,
    )


def _paused_down(op: Op, names: Names) -> None:
    op.drop_table(names.paused, schema=names.schema)


# 10 (59fbd7ad3e6b): the version each payload was written with.


def _payload_version_up(op: Op, names: Names) -> None:
    for table in (names.table, names.history):
        op.add_column(
            table,
            sa.Column(
                "payload_version", sa.SmallInteger(), server_default=sa.text("1"), nullable=False
            ),
            schema=names.schema,
        )


def _payload_version_down(op: Op, names: Names) -> None:
    for table in (names.history, names.table):
        with op.batch_alter_table(table, schema=names.schema) as batch:
            batch.drop_column("payload_version")


# 11 (1ab727525351): each node's own heartbeat interval.


def _node_interval_up(op: Op, names: Names) -> None:
    op.add_column(
        names.nodes,
        sa.Column("heartbeat_interval_ms", sa.BigInteger(), nullable=True),
        schema=names.schema,
    )


def _node_interval_down(op: Op, names: Names) -> None:
    with op.batch_alter_table(names.nodes, schema=names.schema) as batch:
        batch.drop_column("heartbeat_interval_ms")


# 12 (4c6e8a2b9d15): kept results.


def _results_up(op: Op, names: Names) -> None:
    results = names.results
    op.create_table(
        results,
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("task_name", sa.String(100), nullable=False),
        sa.Column("task_instance", sa.String(255), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("value", TEXT, nullable=True),
        sa.Column("error", TEXT, nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{results}")),
        schema=names.schema,
        **TABLE_OPTIONS,
    )
    op.create_index(f"ix_{results}_finished_at", results, ["finished_at"], schema=names.schema)
    op.create_index(
        f"ix_{results}_task", results, ["task_name", "task_instance"], schema=names.schema
    )


def _results_down(op: Op, names: Names) -> None:
    results = names.results
    op.drop_index(f"ix_{results}_task", table_name=results, schema=names.schema)
    op.drop_index(f"ix_{results}_finished_at", table_name=results, schema=names.schema)
    op.drop_table(results, schema=names.schema)


# 13 (a2e5c7f9b136): groups and chains.


def _groups_up(op: Op, names: Names) -> None:
    table, results, groups = names.table, names.results, names.groups
    for column in ("group_id", "awaits"):
        op.add_column(table, sa.Column(column, sa.BigInteger(), nullable=True), schema=names.schema)
    op.create_index(
        f"ix_{table}_group",
        table,
        ["group_id"],
        schema=names.schema,
        postgresql_where=sa.text("group_id IS NOT NULL"),
        sqlite_where=sa.text("group_id IS NOT NULL"),
    )
    op.add_column(
        results, sa.Column("group_id", sa.BigInteger(), nullable=True), schema=names.schema
    )
    op.create_index(f"ix_{results}_group", results, ["group_id"], schema=names.schema)
    op.create_table(
        groups,
        sa.Column("id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("task_name", sa.String(100), nullable=True),
        sa.Column("task_instance", sa.String(255), nullable=True),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("remaining", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("cancelled_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{groups}")),
        schema=names.schema,
        **TABLE_OPTIONS,
    )


def _groups_down(op: Op, names: Names) -> None:
    table, results = names.table, names.results
    op.drop_table(names.groups, schema=names.schema)
    op.drop_index(f"ix_{results}_group", table_name=results, schema=names.schema)
    with op.batch_alter_table(results, schema=names.schema) as batch:
        batch.drop_column("group_id")
    op.drop_index(f"ix_{table}_group", table_name=table, schema=names.schema)
    with op.batch_alter_table(table, schema=names.schema) as batch:
        batch.drop_column("awaits")
        batch.drop_column("group_id")


# 14 (7d3f1e9a2c48): the starts counted against tasks' rate limits.


def _rates_up(op: Op, names: Names) -> None:
    rates = names.rates
    op.create_table(
        rates,
        sa.Column("id", BIG_ID, nullable=False),
        sa.Column("task_name", sa.String(100), nullable=False),
        sa.Column("start_by", UTCDateTime(), nullable=False),
        sa.Column("starts", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{rates}")),
        schema=names.schema,
        **TABLE_OPTIONS,
    )
    op.create_index(
        f"ix_{rates}_task", rates, ["task_name", "start_by", "starts"], schema=names.schema
    )


def _rates_down(op: Op, names: Names) -> None:
    rates = names.rates
    op.drop_index(f"ix_{rates}_task", table_name=rates, schema=names.schema)
    op.drop_table(rates, schema=names.schema)


# 15 (b5c1d8e3f047): per-minute counts of finished executions, for the admin's charts.

#: The histogram buckets of start lag and of duration that this step creates: written out
#: here rather than read from the models, so that the step stays what it was.
_STATS_BUCKETS = 16


def _stats_up(op: Op, names: Names) -> None:
    stats = names.stats
    buckets = [f"{kind}_{i}" for kind in ("lag", "duration") for i in range(_STATS_BUCKETS)]
    op.create_table(
        stats,
        sa.Column("minute", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("task_name", sa.String(100), nullable=False),
        sa.Column("node", sa.String(255), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("executions", sa.Integer(), nullable=False),
        sa.Column("lag_ms", sa.BigInteger(), nullable=False),
        sa.Column("duration_ms", sa.BigInteger(), nullable=False),
        *(sa.Column(name, sa.Integer(), nullable=False) for name in buckets),
        sa.PrimaryKeyConstraint("minute", "task_name", "node", "outcome", name=op.f(f"pk_{stats}")),
        schema=names.schema,
        **TABLE_OPTIONS,
    )
    op.create_index(f"ix_{stats}_task", stats, ["task_name", "minute"], schema=names.schema)


def _stats_down(op: Op, names: Names) -> None:
    stats = names.stats
    op.drop_index(f"ix_{stats}_task", table_name=stats, schema=names.schema)
    op.drop_table(stats, schema=names.schema)


# 16 (e8a4c2f6b913): what the admin's overview reads without a pass over a table.


def _overview_indexes_up(op: Op, names: Names) -> None:
    table, history = names.table, names.history
    op.create_index(
        f"ix_{table}_failing",
        table,
        [sa.text("last_failure DESC"), "task_name", "task_instance"],
        schema=names.schema,
        postgresql_where=sa.text("consecutive_failures > 0"),
        sqlite_where=sa.text("consecutive_failures > 0"),
    )
    op.create_index(
        f"ix_{history}_dead_letters",
        history,
        ["outcome", "task_name"],
        schema=names.schema,
        postgresql_where=sa.text("outcome IN ('abandoned', 'undecodable')"),
        sqlite_where=sa.text("outcome IN ('abandoned', 'undecodable')"),
    )


def _overview_indexes_down(op: Op, names: Names) -> None:
    op.drop_index(f"ix_{names.history}_dead_letters", table_name=names.history, schema=names.schema)
    op.drop_index(f"ix_{names.table}_failing", table_name=names.table, schema=names.schema)


# 17 (9f4b2d7c1e63): which groups are links of a chain.


def _chain_marker_up(op: Op, names: Names) -> None:
    op.add_column(
        names.groups,
        sa.Column("chain", sa.Boolean(), nullable=False, server_default=sa.false()),
        schema=names.schema,
    )


def _chain_marker_down(op: Op, names: Names) -> None:
    with op.batch_alter_table(names.groups, schema=names.schema) as batch:
        batch.drop_column("chain")


# 18 (c7e1a9d4f25b): how many times each execution has snoozed.


def _snoozes_up(op: Op, names: Names) -> None:
    op.add_column(
        names.table,
        sa.Column("snoozes", sa.Integer(), server_default=sa.text("0"), nullable=False),
        schema=names.schema,
    )


def _snoozes_down(op: Op, names: Names) -> None:
    with op.batch_alter_table(names.table, schema=names.schema) as batch:
        batch.drop_column("snoozes")


# 19 (2d8b6f0e4a17): the latest progress a running execution's handler reported.

_PROGRESS_COLUMNS = ("progress", "progress_message", "progress_at")


def _progress_up(op: Op, names: Names) -> None:
    for column in (
        sa.Column("progress", sa.Double(), nullable=True),
        sa.Column("progress_message", TEXT, nullable=True),
        sa.Column("progress_at", TIMESTAMP, nullable=True),
    ):
        op.add_column(names.table, column, schema=names.schema)


def _progress_down(op: Op, names: Names) -> None:
    with op.batch_alter_table(names.table, schema=names.schema) as batch:
        for name in _PROGRESS_COLUMNS:
            batch.drop_column(name)


# 20 (c4a1dba0a16e): when ``cancel`` asked the process running an execution to stop it.


def _stop_request_up(op: Op, names: Names) -> None:
    op.add_column(
        names.table, sa.Column("stop_requested_at", TIMESTAMP, nullable=True), schema=names.schema
    )


def _stop_request_down(op: Op, names: Names) -> None:
    with op.batch_alter_table(names.table, schema=names.schema) as batch:
        batch.drop_column("stop_requested_at")


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One schema change: its number, the branch revision that runs it, and both ways."""

    number: int
    revision: str
    upgrade: Callable[[Op, Names], None]
    downgrade: Callable[[Op, Names], None]


STEPS: tuple[Step, ...] = tuple(
    Step(number=number, revision=revision, upgrade=up, downgrade=down)
    for number, (revision, up, down) in enumerate(
        [
            ("5d7c3a1f0b42", _create_table_up, _create_table_down),
            ("8e41b7c9d2a3", _storage_up, _storage_down),
            ("c3f9a6e1d7b5", _trace_context_up, _trace_context_down),
            ("d81f2b6a9c30", _started_at_up, _started_at_down),
            ("e5a0c4b8f1d2", _payload_text_up, _payload_text_down),
            ("f7b2d9e4a6c1", _due_by_task_up, _due_by_task_down),
            ("626b08d7d8ec", _last_error_up, _last_error_down),
            ("3a9c5e7b1d20", _history_and_nodes_up, _history_and_nodes_down),
            ("b8d2f4a61c37", _paused_up, _paused_down),
            ("59fbd7ad3e6b", _payload_version_up, _payload_version_down),
            ("1ab727525351", _node_interval_up, _node_interval_down),
            ("4c6e8a2b9d15", _results_up, _results_down),
            ("a2e5c7f9b136", _groups_up, _groups_down),
            ("7d3f1e9a2c48", _rates_up, _rates_down),
            ("b5c1d8e3f047", _stats_up, _stats_down),
            ("e8a4c2f6b913", _overview_indexes_up, _overview_indexes_down),
            ("9f4b2d7c1e63", _chain_marker_up, _chain_marker_down),
            ("c7e1a9d4f25b", _snoozes_up, _snoozes_down),
            ("2d8b6f0e4a17", _progress_up, _progress_down),
            ("c4a1dba0a16e", _stop_request_up, _stop_request_down),
        ],
        start=1,
    )
)
"""Every step, in order: ``STEPS[n - 1]`` is step ``n``."""

LATEST = len(STEPS)
"""The newest step."""

STEP_OF_REVISION = {step.revision: step.number for step in STEPS}
"""The step each revision of the ``sqla_scheduler`` branch brings the tables to."""


def run(op: Op, number: int, *, down: bool = False, names: Names = DEFAULT_NAMES) -> None:
    """Run step ``number``'s upgrade (or, ``down``, its downgrade) on the tables ``names``
    names, and record the step they are at after it."""
    step = STEPS[number - 1]
    (step.downgrade if down else step.upgrade)(op, names)
    record(op, names, number - 1 if down else number)


def record(op: Op, names: Names, step: int) -> None:
    """Record that the tables are at ``step``: the record table is created when missing
    and holds one row; at step 0 (no tables) it is dropped."""
    table = record_table(table_for(names.table, names.schema))
    if step == 0:
        op.execute(DropTable(table, if_exists=True))
        return
    op.execute(CreateTable(table, if_not_exists=True))
    op.execute(table.delete())
    # A literal, not a bound parameter: --sql mode writes the statement out as it is.
    op.execute(table.insert().inline().values(step=sa.literal_column(str(int(step)))))
