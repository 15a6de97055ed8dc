"""Paused tasks: one row per task name that no scheduler may pick.

A pause is cluster-wide and persistent: it lives in ``scheduled_tasks_paused``, which every
pick consults, so it holds across restarts and for every process sharing the table.

Revision ID: b8d2f4a61c37
Revises: 3a9c5e7b1d20
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa

from alembic import op
from sqla_scheduler._types import UTCDateTime

revision: str = "b8d2f4a61c37"
down_revision: str | None = "3a9c5e7b1d20"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PAUSED = "scheduled_tasks_paused"


def upgrade() -> None:
    op.create_table(
        PAUSED,
        sa.Column("task_name", sa.String(100), nullable=False),
        sa.Column("paused_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("task_name", name=op.f(f"pk_{PAUSED}")),
    )


def downgrade() -> None:
    op.drop_table(PAUSED)
