"""Create the scheduled_tasks table.

Revision ID: 5d7c3a1f0b42
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "5d7c3a1f0b42"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = ("sqla_scheduler",)
depends_on: str | Sequence[str] | None = None

TABLE = "scheduled_tasks"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("task_name", sa.String(100), nullable=False),
        sa.Column("task_instance", sa.String(255), nullable=False),
        sa.Column("task_data", sa.JSON().with_variant(postgresql.JSONB(), "postgresql")),
        sa.Column("execution_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("picked", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("picked_by", sa.String(255)),
        sa.Column("last_heartbeat", sa.DateTime(timezone=True)),
        sa.Column("last_success", sa.DateTime(timezone=True)),
        sa.Column("last_failure", sa.DateTime(timezone=True)),
        sa.Column(
            "consecutive_failures", sa.Integer(), server_default=sa.text("0"), nullable=False
        ),
        sa.Column("version", sa.BigInteger(), server_default=sa.text("1"), nullable=False),
        sa.Column("priority", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
        sa.Column("schedule", sa.Text()),
        sa.PrimaryKeyConstraint("task_name", "task_instance", name=f"pk_{TABLE}"),
    )
    op.create_index(
        f"ix_{TABLE}_due",
        TABLE,
        [sa.text("priority DESC"), "execution_time"],
        postgresql_where=sa.text("picked = false"),
        sqlite_where=sa.text("picked = 0"),
    )
    op.create_index(
        f"ix_{TABLE}_picked",
        TABLE,
        ["picked_by"],
        postgresql_where=sa.text("picked = true"),
        sqlite_where=sa.text("picked = 1"),
    )


def downgrade() -> None:
    op.drop_index(f"ix_{TABLE}_picked", table_name=TABLE)
    op.drop_index(f"ix_{TABLE}_due", table_name=TABLE)
    op.drop_table(TABLE)
