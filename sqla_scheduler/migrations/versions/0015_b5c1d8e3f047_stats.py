"""Per-minute counts of finished executions: a table beside the scheduler's
(``<table>_stats``) holding, for each minute, task, scheduler process (``node``) and
outcome, how many executions finished so, with the sums and histogram buckets of their
start lags and durations; the admin page's charts read it.

Revision ID: b5c1d8e3f047
Revises: 7d3f1e9a2c48
Create Date: 2026-12-08
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "b5c1d8e3f047"
down_revision: str | None = "7d3f1e9a2c48"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 15
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
