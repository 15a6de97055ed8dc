"""Rate limits: a table beside the scheduler's (``<table>_rates``) holding the starts
counted against each task defined with a ``rate_limit``, one entry per pick that took any
(task name, the latest time they may start, how many), indexed by task and time with the
count: a pick of such a task sums the entries in its window.

Revision ID: 7d3f1e9a2c48
Revises: a2e5c7f9b136
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "7d3f1e9a2c48"
down_revision: str | None = "a2e5c7f9b136"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 14
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
