"""The application's own revision: its ``orders`` table."""

import sqlalchemy as sa

from alembic import op

revision = "a1b2c3d4e5f6"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("orders", sa.Column("id", sa.Integer, primary_key=True))


def downgrade() -> None:
    op.drop_table("orders")
