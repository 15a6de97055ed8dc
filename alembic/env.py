"""Alembic environment for authoring the package's own migrations.

The database comes from ``SQLA_SCHEDULER_AUTHORING_URL`` (or ``sqlalchemy.url``).
"""

from __future__ import annotations

import os

from sqlalchemy import create_engine

from alembic import context
from sqla_scheduler.models import metadata

url = os.environ.get("SQLA_SCHEDULER_AUTHORING_URL") or context.config.get_main_option(
    "sqlalchemy.url"
)
if not url:
    raise SystemExit("set SQLA_SCHEDULER_AUTHORING_URL to a scratch database")

if context.is_offline_mode():
    context.configure(url=url, target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    engine = create_engine(url)
    with engine.connect() as connection:
        context.configure(connection=connection, target_metadata=metadata)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()
