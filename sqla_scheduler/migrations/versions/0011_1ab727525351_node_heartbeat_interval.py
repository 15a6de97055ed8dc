"""Each node records its own ``node_heartbeat_interval``, so that every reader judges
it by that interval (alive when seen within three of them), not by the reader's own.

``heartbeat_interval_ms`` is a nullable ``BIGINT`` on the nodes table: a row written
before this revision (or by a version that does not write it) holds null, and readers
judge it by their own interval, as they all did before.

Revision ID: 1ab727525351
Revises: 59fbd7ad3e6b
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "1ab727525351"
down_revision: str | None = "59fbd7ad3e6b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 11
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
