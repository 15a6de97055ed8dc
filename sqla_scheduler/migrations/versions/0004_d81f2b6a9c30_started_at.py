"""When the handler of a picked execution started (NULL while it only waits in a queue).

A process holds more executions than it runs at once. When it dies, only the executions
whose handler had started count a failure on revival; the ones that were waiting go back
untouched, so a handler that kills its process cannot use up its neighbours' retries.

Revision ID: d81f2b6a9c30
Revises: c3f9a6e1d7b5
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "d81f2b6a9c30"
down_revision: str | None = "c3f9a6e1d7b5"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 4
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
