"""After them: the scheduler's tables as the written revision makes them (its call, on a
database with the application's tables) leave nothing for autogenerate to propose against
the page's ``target_metadata``."""

from alembic.autogenerate import compare_metadata
from alembic.operations import Operations
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine

import sqla_scheduler.alembic

engine = create_engine("sqlite:///history.db")
with engine.begin() as conn:
    Base.metadata.create_all(conn)
    op = Operations(MigrationContext.configure(conn))
    sqla_scheduler.alembic.upgrade(op, version=sqla_scheduler.alembic.LATEST, start=0)
    differences = compare_metadata(MigrationContext.configure(conn), target_metadata)
assert differences == [], differences
engine.dispose()
