"""The history table (one entry per finished attempt) and the nodes table (one row per
running scheduler), beside the scheduler's table.

``scheduled_tasks_history`` keeps what the scheduler's table forgets: failures, abandoned
and undecodable executions with their payloads (so they can be requeued), dead attempts,
and successes when ``history = "all"``. ``scheduled_tasks_nodes`` is where each running
scheduler says it is alive.

Revision ID: 3a9c5e7b1d20
Revises: 626b08d7d8ec
Create Date: 2026-12-04
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "3a9c5e7b1d20"
down_revision: str | None = "626b08d7d8ec"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 8
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
