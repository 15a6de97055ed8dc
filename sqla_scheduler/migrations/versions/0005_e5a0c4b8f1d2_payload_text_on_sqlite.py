"""SQLite: the payload column declared ``TEXT``, so a payload comes back as it was given.

A column declared ``JSON`` has numeric affinity on SQLite: a payload that is a bare number
was stored as an integer or a real (``1.0`` came back ``1``, ``2**63 + 1`` a float,
``10**400`` infinity). The table is rebuilt with the column declared ``TEXT``; what was
stored as a number is written back as its JSON text. PostgreSQL is left as it is.

Revision ID: e5a0c4b8f1d2
Revises: d81f2b6a9c30
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "e5a0c4b8f1d2"
down_revision: str | None = "d81f2b6a9c30"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 5
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
