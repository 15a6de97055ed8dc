"""Kept results: a table beside the scheduler's (``<table>_results``) holding the final
outcome of each finished execution of a task defined with ``keep_result=True``, with the
JSON text of what its handler returned or its last error, for ``Scheduler.result`` and
``Scheduler.wait``. Indexed by task and instance, and by ``finished_at`` for pruning.

Revision ID: 4c6e8a2b9d15
Revises: 1ab727525351
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "4c6e8a2b9d15"
down_revision: str | None = "1ab727525351"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 12
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
