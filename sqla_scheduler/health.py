"""Whether a database is ready for the scheduler: reachable, its schema one this version runs
on (at the package's newest step, or past it) and, when asked about one, a named scheduler
alive.

[`check`][sqla_scheduler.health.check] is what ``sqla-scheduler health`` runs, as a
liveness or readiness probe:

```python
from sqla_scheduler.health import check

found = check("postgresql+psycopg://app@db/app")
if not found.healthy:
    print(found.reason)
found = check("postgresql+psycopg://app@db/app", name="worker-1")  # and is worker-1 alive?
```

The step the schema is at, counted as ``sqla-scheduler db current`` counts it, is read
where the ways of migrating record it: the revision in the version table of
``sqla-scheduler db upgrade`` (``sqla_scheduler_alembic_version``) first, else in the
application's own Alembic version table, whose rows of the ``sqla_scheduler`` branch are
the scheduler's, else the step recorded beside the tables (``scheduled_tasks_schema``),
which the application's own revisions calling ``sqla_scheduler.alembic`` write. Where none
records one (the table was made with ``metadata.create_all``), the table itself is
compared with the package's model, as autogenerate would.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, Engine, Table, inspect, select
from sqlalchemy.engine import URL

from sqla_scheduler import _store, migrate
from sqla_scheduler._dialects import borrowed_engine
from sqla_scheduler._durations import format_duration
from sqla_scheduler._limits import text_problem
from sqla_scheduler._migration_steps import LATEST, STEP_OF_REVISION
from sqla_scheduler._node import ALIVE_INTERVALS, Node, database_now
from sqla_scheduler._statements import statements_on
from sqla_scheduler.models import DEFAULT_TABLE_NAME, nodes_table, record_table, table_for

__all__ = ["APP_VERSION_TABLE", "Health", "check"]

APP_VERSION_TABLE = "alembic_version"
"""Alembic's default version table: where an application's ``alembic upgrade heads``
records the scheduler's revisions unless its ``env.py`` names another."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    """What [`check`][sqla_scheduler.health.check] found."""

    healthy: bool
    """Whether this version runs on the schema: at the package's newest step, or past it (a
    newer version upgraded it; each step is additive). With a node asked about, whether it
    is alive too."""
    reason: str
    """One line: what was found, and when it is not healthy, what to do."""
    step: int | None = None
    """The step of the package's migrations the schema is at, as ``sqla-scheduler db
    current`` counts them (``None`` when no step is recorded and the table was compared
    with the model, or a newer version's revision is recorded without its step)."""
    latest: int = LATEST
    """This version's newest step."""
    current: tuple[str, ...]
    """The Alembic revisions of the package recorded in the database (empty when none is)."""
    heads: tuple[str, ...]
    """The package's head revision(s): its newest step's."""
    version_table: str | None
    """Where the step was read: a version table, or the record beside the tables
    (``scheduled_tasks_schema``); ``None`` when the table was compared with the model."""
    node: Node | None = None
    """The node the check was asked about, as found (``None`` when it was not asked about
    one, or found none)."""


def check(
    url: str | URL | Engine,
    *,
    version_table: str = APP_VERSION_TABLE,
    name: str | None = None,
    node_heartbeat_interval: timedelta = timedelta(seconds=30),
    table_name: str = DEFAULT_TABLE_NAME,
    schema: str | None = None,
) -> Health:
    """Connect to ``url`` (a URL or an engine) and tell whether this version runs on its
    schema (at the head, or ahead of it) and, with ``name``, whether the scheduler of that
    name is alive.

    ``version_table`` names the application's own Alembic version table, read when
    ``sqla_scheduler_alembic_version`` records nothing. A scheduler is alive when its row
    in the nodes table was written within three of its ``node_heartbeat_interval``s (as
    it recorded it; ``node_heartbeat_interval`` judges a row written by a version that did
    not) by the database's clock on PostgreSQL, this machine's on SQLite. An unreachable
    database raises SQLAlchemy's ``OperationalError``; a missing table (or SQLite file,
    which is not created) raises [`MissingTableError`][]. ``table_name`` and ``schema``
    name the table checked (by default the one the shipped migrations create).
    """
    if node_heartbeat_interval <= timedelta(0):
        raise ValueError(
            f"node_heartbeat_interval must be more than zero, got {node_heartbeat_interval!r}"
        )
    if name is not None:
        problem = _name_problem(name)
        if problem is not None:
            raise ValueError(f"name {name!r} {problem}")
    table = table_for(table_name, schema)
    with borrowed_engine(url) as engine:
        _store.check_sqlite_file(engine.url, table)
        with engine.connect() as conn:
            _store.check_table(conn, table)
            found = _schema_health(conn, table, version_table)
            if name is None or not found.healthy:
                return found
            return _node_health(conn, table, found, name, node_heartbeat_interval)


def _node_health(
    conn: Connection, table: Table, schema: Health, name: str, interval: timedelta
) -> Health:
    """``schema`` (healthy), and whether the node ``name`` is alive."""
    now = database_now(conn)
    statements = statements_on(conn, table)
    node = _store.nodes.get_node(conn, statements, name, now=now, interval=interval)
    if node is None:
        reason = (
            f"no scheduler named {name!r} is recorded in {nodes_table(table).fullname!r}: it "
            "has not started, stopped, or runs under another name"
        )
        return replace(schema, healthy=False, reason=reason)
    ago = format_duration(timedelta(seconds=max(0, round((now - node.last_seen).total_seconds()))))
    if not node.alive:
        judged_by = node.heartbeat_interval if node.heartbeat_interval is not None else interval
        reason = (
            f"scheduler {name!r} was last seen {ago} ago, more than {ALIVE_INTERVALS} "
            f"node_heartbeat_intervals of {format_duration(judged_by)}: it was killed, hangs, "
            "or cannot reach the database"
        )
        return replace(schema, healthy=False, reason=reason, node=node)
    return replace(
        schema, reason=f"{schema.reason}; scheduler {name!r} was last seen {ago} ago", node=node
    )


def _schema_health(conn: Connection, table: Table, app_version_table: str) -> Health:
    script = migrate.script_directory()
    heads = tuple(script.get_heads())
    standalone = migrate.current(conn)
    if standalone:
        unknown = [revision for revision in standalone if revision not in STEP_OF_REVISION]
        if unknown:  # ahead: a newer version upgraded it, and this one runs on it
            return _ahead(conn, table, standalone, unknown, heads)
        return _steps(standalone, heads, migrate.VERSION_TABLE, "sqla-scheduler db upgrade")
    ours = tuple(
        revision
        for revision in migrate.current(conn, version_table=app_version_table)
        if revision in STEP_OF_REVISION
    )
    if ours:
        return _steps(ours, heads, app_version_table, "alembic upgrade heads")
    step = _recorded_step(conn, table)
    if step is not None:  # the application's own history runs the steps
        return _at_step(
            step,
            heads,
            record_table(table).fullname,
            "sqla-scheduler alembic revision`, then `alembic upgrade head",
        )
    return _compared(conn, table, heads, app_version_table)


def _steps(current: tuple[str, ...], heads: tuple[str, ...], where: str, fix: str) -> Health:
    """The schema at the step of the branch's revisions ``current``, read in ``where``."""
    step = max(STEP_OF_REVISION[revision] for revision in current)
    return _at_step(step, heads, where, fix, current=current)


def _at_step(
    step: int, heads: tuple[str, ...], where: str, fix: str, current: tuple[str, ...] = ()
) -> Health:
    """The schema at ``step``, read in ``where``; ``fix`` says what upgrades it."""
    if step > LATEST:
        reason = (
            f"the schema is ahead, at step {step} ({where}), past step {LATEST}, this "
            "version's newest: a newer version upgraded it, and this one runs on it (each "
            "migration step is additive)"
        )
    elif step == LATEST:
        reason = f"the schema is at step {step} of {LATEST} ({where})"
    else:
        reason = f"the schema is behind, at step {step} of {LATEST} ({where}): run `{fix}`"
    return Health(
        healthy=step >= LATEST,
        reason=reason,
        step=step,
        current=current,
        heads=heads,
        version_table=where,
    )


def _ahead(
    conn: Connection,
    table: Table,
    current: tuple[str, ...],
    unknown: list[str],
    heads: tuple[str, ...],
) -> Health:
    """``sqla_scheduler_alembic_version`` records a revision this version does not know: a
    newer version's, whose step is told where the newer version recorded it."""
    step = _recorded_step(conn, table)
    if step is not None and step > LATEST:
        return _at_step(step, heads, record_table(table).fullname, "", current=current)
    where = migrate.VERSION_TABLE
    reason = (
        f"the schema is ahead of step {LATEST}, this version's newest: {where} records "
        f"revision {', '.join(unknown)}, which this version does not know; a newer version "
        "upgraded it, and this one runs on it (each migration step is additive)"
    )
    return Health(healthy=True, reason=reason, current=current, heads=heads, version_table=where)


def _recorded_step(conn: Connection, table: Table) -> int | None:
    """The step recorded beside ``table`` (in ``<table>_schema``), or ``None``."""
    recorded = record_table(table)
    if not inspect(conn).has_table(recorded.name, schema=recorded.schema):
        return None
    step = conn.scalar(select(recorded.c.step))
    return None if step is None else int(step)


def _compared(
    conn: Connection, table: Table, heads: tuple[str, ...], app_version_table: str
) -> Health:
    """No step is recorded: compare the table itself with this version's model."""
    metadata = table.metadata

    def ours(name: str | None, type_: str, _parents: Any) -> bool:
        return type_ != "table" or name in metadata.tables

    context = MigrationContext.configure(conn, opts={"include_name": ours})
    differences = compare_metadata(context, metadata)
    unrecorded = (
        f"no step is recorded in {migrate.VERSION_TABLE}, {app_version_table} or "
        f"{record_table(table).fullname}"
    )
    newest = f"step {LATEST}, this version's newest"
    if not differences:
        reason = f"the table matches {newest} ({unrecorded})"
        return Health(healthy=True, reason=reason, current=(), heads=heads, version_table=None)
    reason = (
        f"{unrecorded}, and the table differs from {newest} ({len(differences)} "
        f"difference(s), the first: {_describe(differences[0])})"
    )
    return Health(healthy=False, reason=reason, current=(), heads=heads, version_table=None)


def _describe(difference: Any) -> str:
    """One of autogenerate's differences in a few words: the operation and what it is on.

    A difference is a tuple, ``("add_index", Index)`` or ``("remove_column", schema, table,
    Column)``, or for changes to a column a list of ``("modify_type", schema, table, column,
    ...)``.
    """
    if isinstance(difference, list):
        operation, _schema, table, column = difference[0][:4]
        return f"{operation} {table}.{column}"
    operation, *rest = difference
    name = getattr(rest[-1], "name", None) if rest else None
    return f"{operation} {name}" if name else str(operation)


def _name_problem(name: object) -> str | None:
    """What makes ``name`` no scheduler's name a database can hold, or ``None``."""
    if not isinstance(name, str):
        return f"is a {type(name).__name__}, not text"
    return text_problem(name)
