"""SQLite: the payload column declared ``TEXT``, so a payload comes back as it was given.

A column declared ``JSON`` has numeric affinity on SQLite: a payload that is a bare number
was stored as an integer or a real (``1.0`` came back ``1``, ``2**63 + 1`` a float,
``10**400`` infinity). The table is rebuilt with the column declared ``TEXT``; what was
stored as a number is written back as its JSON text. PostgreSQL is left as it is.

Revision ID: e5a0c4b8f1d2
Revises: d81f2b6a9c30
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op

revision: str = "e5a0c4b8f1d2"
down_revision: str | None = "d81f2b6a9c30"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "scheduled_tasks"


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table(TABLE) as batch:
        batch.alter_column("task_data", type_=sa.Text(), existing_type=sa.JSON())
    # The rebuild's CAST wrote an infinite real as 'Inf', which is not JSON.
    op.execute(
        f"UPDATE {TABLE} SET task_data = CASE task_data WHEN 'Inf' THEN '1e999' "
        "ELSE '-1e999' END WHERE task_data IN ('Inf', '-Inf')"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table(TABLE) as batch:
        batch.alter_column("task_data", type_=sa.JSON(), existing_type=sa.Text())
