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

import sqlalchemy as sa

from alembic import op
from sqla_scheduler._types import UTCDateTime

revision: str = "3a9c5e7b1d20"
down_revision: str | None = "626b08d7d8ec"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

HISTORY = "scheduled_tasks_history"
NODES = "scheduled_tasks_nodes"


def upgrade() -> None:
    op.create_table(
        HISTORY,
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("task_name", sa.String(100), nullable=False),
        sa.Column("task_instance", sa.String(255), nullable=False),
        sa.Column("outcome", sa.String(20), nullable=False),
        sa.Column("execution_time", UTCDateTime(), nullable=True),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=False),
        sa.Column("picked_by", sa.String(255), nullable=True),
        sa.Column("attempt", sa.Integer(), server_default=sa.text("1"), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("task_data", sa.Text(), nullable=True),
        sa.Column("priority", sa.SmallInteger(), server_default=sa.text("0"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{HISTORY}")),
    )
    op.create_index(f"ix_{HISTORY}_finished_at", HISTORY, ["finished_at"])
    op.create_index(f"ix_{HISTORY}_task", HISTORY, ["task_name", "task_instance"])
    op.create_table(
        NODES,
        sa.Column("name", sa.String(255), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("last_seen", UTCDateTime(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("running", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("version", sa.String(50), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f(f"pk_{NODES}")),
    )


def downgrade() -> None:
    op.drop_table(NODES)
    op.drop_index(f"ix_{HISTORY}_task", table_name=HISTORY)
    op.drop_index(f"ix_{HISTORY}_finished_at", table_name=HISTORY)
    op.drop_table(HISTORY)
