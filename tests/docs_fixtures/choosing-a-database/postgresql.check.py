"""After them: SQLAlchemy took the URL (psycopg, sync and async) and the scheduler was built
without connecting; that it then works on PostgreSQL is the rest of the suite's job."""

assert (engine.dialect.name, engine.dialect.driver) == ("postgresql", "psycopg")
assert engine.pool.checkedin() == engine.pool.checkedout() == 0  # never connected
assert scheduler.engine is engine
assert list(scheduler.tasks) == ["send-confirmation"]
async_engine = create_async_engine(engine.url)  # the comment's alternative
assert async_engine.dialect.is_async
