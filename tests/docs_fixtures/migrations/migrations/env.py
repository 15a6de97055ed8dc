"""The ``env.py`` of the application's Alembic project in docs/migrations.md.

Its ``target_metadata`` is the page's: the test script runs the page's lines, then Alembic
with their result in the config's ``attributes`` (Alembic's way of handing objects to
``env.py``).
"""

from sqlalchemy import create_engine

from alembic import context

config = context.config
target_metadata = config.attributes["target_metadata"]

engine = create_engine(config.get_main_option("sqlalchemy.url"))
with engine.connect() as connection:
    context.configure(connection=connection, target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
