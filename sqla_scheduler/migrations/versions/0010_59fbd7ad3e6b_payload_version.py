"""The version each payload was written with, on the scheduler's table and its history.

A task defined with ``payload_version=N`` writes N into the rows it inserts (and into a row
whose payload its handler replaces); its ``upcasters`` bring a payload of an earlier
version up to N before it is decoded. A history entry keeps the version of the payload it
holds, so that ``requeue`` puts the execution back as it was. Both columns are
``SMALLINT NOT NULL DEFAULT 1``: every row and entry written before this revision reads as
version 1, which is what every task wrote then.

Revision ID: 59fbd7ad3e6b
Revises: b8d2f4a61c37
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "59fbd7ad3e6b"
down_revision: str | None = "b8d2f4a61c37"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 10
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
