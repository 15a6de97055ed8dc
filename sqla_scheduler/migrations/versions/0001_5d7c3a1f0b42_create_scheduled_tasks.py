"""Create the scheduled_tasks table.

Revision ID: 5d7c3a1f0b42
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "5d7c3a1f0b42"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = ("sqla_scheduler",)
depends_on: str | Sequence[str] | None = None

STEP = 1
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
