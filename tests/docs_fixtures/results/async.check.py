"""After it: the result is kept in the table, where a sync client reads it too."""

from sqlalchemy import create_engine

from sqla_scheduler import Scheduler

reader = create_engine("sqlite:///app.db")
assert Scheduler(reader, tasks=[]).result(reader, "render-report", "report-42-2030-05") == result
reader.dispose()
