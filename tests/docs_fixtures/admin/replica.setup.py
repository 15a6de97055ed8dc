"""Before it: the application's engine and tasks, and a replica's URL (here the same
SQLite file: nothing is read)."""

from sqlalchemy import create_engine

from sqla_scheduler import Scheduler

engine = create_engine("sqlite:///app.db")
tasks: list = []
REPLICA_URL = "sqlite:///app.db"
