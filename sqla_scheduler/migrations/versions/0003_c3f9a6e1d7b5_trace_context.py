"""A trace context per execution, for tracing that continues the scheduling request's trace.

A nullable JSON column: the W3C trace context (``traceparent``, ``tracestate``) captured
when the execution was scheduled, written only when an interceptor such as the
OpenTelemetry integration captures one.

Revision ID: c3f9a6e1d7b5
Revises: 8e41b7c9d2a3
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op
from sqla_scheduler import _migration_steps

revision: str = "c3f9a6e1d7b5"
down_revision: str | None = "8e41b7c9d2a3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

STEP = 3
"""The step of ``sqla_scheduler._migration_steps`` this revision runs."""


def upgrade() -> None:
    _migration_steps.run(op, STEP)


def downgrade() -> None:
    _migration_steps.run(op, STEP, down=True)
