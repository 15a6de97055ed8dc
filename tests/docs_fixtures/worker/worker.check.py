"""After them: the user and the welcome were committed together, and the welcome runs as
the worker would run it."""

from sqlalchemy import select

from sqla_scheduler.testing import run_due

with engine.connect() as conn:
    assert conn.scalars(select(users.c.username)).all() == ["ada"]
welcome = scheduler.get_execution(engine, "send-welcome", "welcome-ada")
assert welcome is not None
assert welcome.data == {"username": "ada"}, welcome.data
assert run_due(scheduler) == 1
