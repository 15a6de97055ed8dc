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

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from alembic import op

revision: str = "c3f9a6e1d7b5"
down_revision: str | None = "8e41b7c9d2a3"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "scheduled_tasks"


def upgrade() -> None:
    op.add_column(
        TABLE,
        sa.Column(
            "trace_context",
            sa.JSON().with_variant(postgresql.JSONB(), "postgresql"),
            nullable=True,
        ),
    )


def downgrade() -> None:
    with op.batch_alter_table(TABLE) as batch:
        batch.drop_column("trace_context")
