"""Which groups are links of a chain (``<table>_groups.chain``): a chain's first link and
a one-member group with a callback write the same rows otherwise, and cancelling the
first link before it ran cancels the links after it, where cancelling a group's member
counts it as finished. Groups written before this step are not marked.

Revision ID: 9f4b2d7c1e63
Revises: e8a4c2f6b913
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "9f4b2d7c1e63"
down_revision: str | None = "e8a4c2f6b913"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 17
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
