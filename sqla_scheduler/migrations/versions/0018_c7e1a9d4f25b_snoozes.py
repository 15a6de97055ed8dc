"""How many times each execution has snoozed (``<table>.snoozes``, ``ctx.snoozes``): a
handler that raises ``Snooze`` runs again later without a failure counted. Rows written
before this step read 0.

Revision ID: c7e1a9d4f25b
Revises: 9f4b2d7c1e63
Create Date: 2026-12-09
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "c7e1a9d4f25b"
down_revision: str | None = "9f4b2d7c1e63"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 18
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
