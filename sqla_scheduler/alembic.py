"""The scheduler's migrations inside an application's own Alembic history.

The application keeps one history (one head, ``alembic upgrade head``): one of its
revisions calls [`upgrade`][sqla_scheduler.alembic.upgrade] to bring the scheduler's
tables to a step of the package's migrations, and its ``downgrade()`` calls
[`downgrade`][sqla_scheduler.alembic.downgrade] to take them back:

```python
from alembic import op

import sqla_scheduler.alembic


def upgrade() -> None:
    sqla_scheduler.alembic.upgrade(op, version=11)


def downgrade() -> None:
    sqla_scheduler.alembic.downgrade(op, version=0)
```

The database records the step its tables are at (a one-row table beside them,
``<table_name>_schema``), whichever way ran the steps: these functions, the
``sqla_scheduler`` branch in ``version_locations``, or ``sqla-scheduler db upgrade``. So
each call runs only the steps between where the database is and ``version``: running it
again does nothing. A revision names its step as a number, never
[`LATEST`][sqla_scheduler.alembic.LATEST], so that it does the same whichever version of
the package runs it: after an upgrade of the package brings step 12, the application's
next revision calls ``upgrade(op, version=12)`` and, in its ``downgrade()``,
``downgrade(op, version=11)``.

``table_name`` and ``schema`` put the tables under other names; give the same ones to
[`metadata_for`][sqla_scheduler.models.metadata_for] for ``target_metadata``, and to
``SchedulerConfig``. A schema must exist before the first step runs.
"""

from __future__ import annotations

from sqlalchemy import Connection, String, column, inspect, select, table

from sqla_scheduler import _migration_steps
from sqla_scheduler._migration_steps import (
    APP_VERSION_TABLE,
    DEFAULT_NAMES,
    STANDALONE_VERSION_TABLE,
    STEP_OF_REVISION,
    Names,
    Op,
    record,
    run,
)
from sqla_scheduler.exceptions import UnknownStepError
from sqla_scheduler.models import DEFAULT_TABLE_NAME, check_names, record_table, table_for

__all__ = ["LATEST", "current_step", "downgrade", "upgrade"]

LATEST: int = _migration_steps.LATEST
"""The package's newest step: where ``upgrade`` goes when given no ``version``."""


def upgrade(
    op: Op,
    version: int | None = None,
    *,
    table_name: str = DEFAULT_TABLE_NAME,
    schema: str | None = None,
    start: int | None = None,
) -> None:
    """Bring the scheduler's tables from the step the database is at to step ``version``
    (by default [`LATEST`][sqla_scheduler.alembic.LATEST], the package's newest), in an
    Alembic revision's ``upgrade()``:

    ```python
    def upgrade() -> None:
        sqla_scheduler.alembic.upgrade(op, version=11)
    ```

    A database at ``version`` or beyond is left as it is. The step the database is at is
    read through ``op`` (see [`current_step`][sqla_scheduler.alembic.current_step]).
    In Alembic's offline mode (``alembic upgrade --sql``) there is no database to read:
    ``start`` must say which step it is at (0: none of the tables). Online, what the
    database records wins (so a revision written with ``start=0`` does nothing on a
    database whose tables came another way), and ``start`` serves only where it records
    nothing (tables made by hand at a known step); the step is then recorded.

    Raises ``ValueError`` for a ``version`` or ``start`` outside 0 to ``LATEST``, a
    ``table_name`` or ``schema`` that is not an identifier, or no ``start`` in offline mode;
    [`UnknownStepError`][sqla_scheduler.exceptions.UnknownStepError] when the tables are
    there and no step is known for them.
    """
    names = _names(table_name, schema)
    target = LATEST if version is None else _step("version", version)
    at = _starting_step(op, names, start)
    for number in range(at + 1, target + 1):
        run(op, number, names=names)


def downgrade(
    op: Op,
    version: int,
    *,
    table_name: str = DEFAULT_TABLE_NAME,
    schema: str | None = None,
    start: int | None = None,
) -> None:
    """Take the scheduler's tables from the step the database is at down to step
    ``version`` (0 drops them all, with the record of the step), in an Alembic revision's
    ``downgrade()``:

    ```python
    def downgrade() -> None:
        sqla_scheduler.alembic.downgrade(op, version=0)
    ```

    A database at ``version`` or before it is left as it is; ``start``, the names and the
    errors are those of [`upgrade`][sqla_scheduler.alembic.upgrade].
    """
    names = _names(table_name, schema)
    target = _step("version", version)
    at = _starting_step(op, names, start)
    for number in range(at, target, -1):
        run(op, number, down=True, names=names)


def current_step(
    connection: Connection,
    *,
    table_name: str = DEFAULT_TABLE_NAME,
    schema: str | None = None,
    version_table: str = APP_VERSION_TABLE,
) -> int:
    """The step of the package's migrations the scheduler's tables are at, 0 when none of
    them is there.

    The step recorded in ``<table_name>_schema``, which every way of running the steps
    writes. A database upgraded by a version of the package that did not record it has
    the step inferred from the ``sqla_scheduler`` branch's revision found in
    ``sqla_scheduler_alembic_version`` (``sqla-scheduler db upgrade``), else in
    ``version_table`` (the application's ``alembic upgrade heads``); the branch makes the
    default names only, so only they are inferred. Tables found with neither (made by hand
    or by ``metadata.create_all``, or under other names by a version that recorded no
    step) raise [`UnknownStepError`][sqla_scheduler.exceptions.UnknownStepError]: the step
    is not guessed from the tables' shape. Tell ``upgrade`` the step they are at with its
    ``start``, which records it.
    """
    names = _names(table_name, schema)
    _recorded, found = _read(connection, names, version_table)
    if found is None:
        raise UnknownStepError(_unknown(names, version_table))
    return found


def _read(connection: Connection, names: Names, version_table: str) -> tuple[bool, int | None]:
    """Whether the step is recorded, and the step (``None``: tables there, step unknown)."""
    inspector = inspect(connection)
    if inspector.has_table(names.record, schema=names.schema):
        recorded = record_table(table_for(names.table, names.schema))
        step = connection.scalar(select(recorded.c.step))
        if step is not None:
            return True, step
    if names == DEFAULT_NAMES:
        for versions in (STANDALONE_VERSION_TABLE, version_table):
            if not inspector.has_table(versions):
                continue
            version_num = column("version_num", String())
            ids = connection.scalars(select(version_num).select_from(table(versions)))
            steps = [STEP_OF_REVISION[id_] for id_ in ids if id_ in STEP_OF_REVISION]
            if steps:
                return False, max(steps)
    tables = (names.table, names.history, names.nodes, names.paused)
    if any(inspector.has_table(name, schema=names.schema) for name in tables):
        return False, None
    return False, 0


def _unknown(names: Names, version_table: str) -> str:
    where = names.table if names.schema is None else f"{names.schema}.{names.table}"
    return (
        f"the scheduler's table {where!r} is there, but no migration step is recorded for it "
        f"({names.record!r}) nor a sqla_scheduler revision in {STANDALONE_VERSION_TABLE!r} or "
        f"{version_table!r}: pass start=N to sqla_scheduler.alembic.upgrade, N the step its "
        "tables are at, to record it"
    )


def _starting_step(op: Op, names: Names, start: int | None) -> int:
    context = op.get_context()
    if start is not None:
        start = _step("start", start)
    if context.as_sql:
        if start is None:
            raise ValueError(
                "start is required in Alembic's offline (--sql) mode, where the database "
                "cannot be read: pass start=N, the step the database is at (0 when it has "
                "none of the scheduler's tables)"
            )
        return start
    recorded, found = _read(op.get_bind(), names, context.version_table)
    if found is None:  # tables with no step known: start says it, if given
        found = start
    if found is None:
        raise UnknownStepError(_unknown(names, context.version_table))
    if not recorded and found > 0:
        record(op, names, found)
    return found


def _step(argument: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= LATEST:
        raise ValueError(f"{argument} must be a step from 0 to {LATEST}, got {value!r}")
    return value


def _names(table_name: str, schema: str | None) -> Names:
    check_names(table_name, schema)
    return Names(table=table_name, schema=schema)
