"""The latest progress a running execution's handler reported (``<table>.progress``,
``progress_message``, ``progress_at``; ``ctx.report_progress``, ``Execution.progress``):
all three are ``NULL`` until a handler reports, and again once the execution finishes.

Revision ID: 2d8b6f0e4a17
Revises: c7e1a9d4f25b
Create Date: 2026-12-10
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "2d8b6f0e4a17"
down_revision: str | None = "c7e1a9d4f25b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 19
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
