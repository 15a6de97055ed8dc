"""Paused tasks: one row per task name that no scheduler may pick.

A pause is cluster-wide and persistent: it lives in ``scheduled_tasks_paused``, which every
pick consults, so it holds across restarts and for every process sharing the table.

Revision ID: b8d2f4a61c37
Revises: 3a9c5e7b1d20
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "b8d2f4a61c37"
down_revision: str | None = "3a9c5e7b1d20"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 9
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
