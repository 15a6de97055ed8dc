"""Two indexes for the admin's overview: the failing executions, latest failure first
(``ix_<table>_failing``, on the failing rows only where the database can), and the
history's dead letters by outcome and task (``ix_<table>_history_dead_letters``), so that
the overview lists the one and counts the other without a pass over a whole table.

Revision ID: e8a4c2f6b913
Revises: b5c1d8e3f047
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "e8a4c2f6b913"
down_revision: str | None = "b5c1d8e3f047"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 16
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
