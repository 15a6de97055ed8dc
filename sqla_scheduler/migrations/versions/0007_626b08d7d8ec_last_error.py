"""The error of an execution's last failed attempt, kept on its row.

A nullable text column: the exception's type and message, then its traceback, cut to a
few KB (see ``_error_text``). A failure writes it, a success clears it; the next attempt
reads it as ``ctx.last_error``.

Revision ID: 626b08d7d8ec
Revises: f7b2d9e4a6c1
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "626b08d7d8ec"
down_revision: str | None = "f7b2d9e4a6c1"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 7
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
