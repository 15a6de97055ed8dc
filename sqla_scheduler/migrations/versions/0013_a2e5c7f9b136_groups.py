"""Groups and chains: a table beside the scheduler's (``<table>_groups``) with one row per
group (its callback's key, how many members it has and how many have not finished), and
two nullable columns on the scheduler's table: ``group_id`` (the group a member belongs
to, indexed where set) and ``awaits`` (the group a callback waits for). The results table
gains ``group_id``, indexed, so that a callback sees its members' outcomes.

Revision ID: a2e5c7f9b136
Revises: 4c6e8a2b9d15
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "a2e5c7f9b136"
down_revision: str | None = "4c6e8a2b9d15"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 13
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
