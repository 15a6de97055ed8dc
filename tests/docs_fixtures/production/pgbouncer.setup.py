"""Before it: what the page's fragment uses."""

from sqlalchemy import create_engine

from sqla_scheduler import SchedulerConfig
