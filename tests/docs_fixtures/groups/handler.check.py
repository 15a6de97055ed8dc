"""After it: the recurring task runs on the 1st of June and fans out over the customers
with its success; the statements run, then the email, and the group's keys name May."""

from datetime import datetime, timezone

from sqlalchemy import create_engine

from sqla_scheduler import ManualClock, Scheduler
from sqla_scheduler.testing import run_due

engine = create_engine("sqlite:///app.db")
clock = ManualClock(datetime(2030, 5, 31, 12, 0, tzinfo=timezone.utc))
scheduler = Scheduler(
    engine, tasks=[monthly_statements, render_statement, email_statements], clock=clock
)
assert run_due(scheduler) == 0  # registered: its first run is on the 1st, at 06:00
clock.set(datetime(2030, 6, 1, 6, 0, tzinfo=timezone.utc))
assert run_due(scheduler) == 1 + 200 + 1  # the fan-out, the statements, the email
sent = scheduler.result(engine, "email-statements", "statements-2030-05")
assert sent.value == {"rendered": 200, "missing": 0}
engine.dispose()
