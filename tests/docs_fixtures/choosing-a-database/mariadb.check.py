"""After them: SQLAlchemy took the URL (PyMySQL, and asyncmy in the comment) and the
scheduler was built without connecting; that it then works on MariaDB is the rest of the
suite's job."""

from sqlalchemy import make_url

assert (engine.dialect.name, engine.dialect.driver) == ("mysql", "pymysql")
assert engine.pool.checkedin() == engine.pool.checkedout() == 0  # never connected
assert scheduler.engine is engine
assert list(scheduler.tasks) == ["send-confirmation"]
async_engine = create_async_engine(make_url(engine.url).set(drivername="mysql+asyncmy"))
assert async_engine.dialect.is_async
