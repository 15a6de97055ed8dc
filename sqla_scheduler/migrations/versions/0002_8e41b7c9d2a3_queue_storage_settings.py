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

revision: str = "8e41b7c9d2a3"
down_revision: str | None = "5d7c3a1f0b42"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "scheduled_tasks"
SETTINGS = (
    "fillfactor = 90, "
    "autovacuum_vacuum_scale_factor = 0.0, "
    "autovacuum_vacuum_threshold = 5000, "
    "autovacuum_vacuum_insert_scale_factor = 0.0, "
    "autovacuum_vacuum_insert_threshold = 5000, "
    "autovacuum_analyze_scale_factor = 0.02"
)
NAMES = (
    "fillfactor, autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, "
    "autovacuum_vacuum_insert_scale_factor, autovacuum_vacuum_insert_threshold, "
    "autovacuum_analyze_scale_factor"
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE {TABLE} SET ({SETTINGS})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE {TABLE} RESET ({NAMES})")
