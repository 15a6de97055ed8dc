"""Storage settings for a table that churns like a queue (PostgreSQL).

fillfactor 90 leaves room on each page, so that heartbeats (which touch no indexed
column) are HOT updates that write no index entries; autovacuum runs after a small,
fixed number of dead rows instead of a fraction of the table, so a busy queue's dead
tuples are reclaimed while the table is still small.

Revision ID: 8e41b7c9d2a3
Revises: 5d7c3a1f0b42
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "8e41b7c9d2a3"
down_revision: str | None = "5d7c3a1f0b42"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 2
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
