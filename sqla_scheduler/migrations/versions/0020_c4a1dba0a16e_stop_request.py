"""When ``cancel`` asked the process running an execution to stop it
(``<table>.stop_requested_at``): ``NULL`` unless a stop was requested of a running
execution, which then ends ``cancelled``.

Revision ID: c4a1dba0a16e
Revises: 2d8b6f0e4a17
Create Date: 2026-12-14
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "c4a1dba0a16e"
down_revision: str | None = "2d8b6f0e4a17"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 20
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
