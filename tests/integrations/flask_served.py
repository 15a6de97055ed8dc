"""The Flask application that ``test_flask.py`` serves with real ``flask`` processes.

It logs to stderr with each line's pid, so the test can count the schedulers that started
(``scheduler '...' started``) and see which process ran an execution.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
from datetime import timedelta

from flask import Flask
from sqlalchemy import create_engine

from sqla_scheduler import ExecutionContext, Scheduler, SchedulerConfig, configure_sqlite, one_time
from sqla_scheduler.integrations.flask import init_app

log = logging.getLogger("flask_served")


@one_time("record", payload_type=str)
def record(ctx: ExecutionContext[str]) -> None:
    log.info("ran %s", ctx.payload)


#: A test that sees this process hang sends SIGUSR1: every thread's stack goes to the log.
faulthandler.register(signal.SIGUSR1, all_threads=True)


def create_app() -> Flask:
    logging.basicConfig(level=logging.INFO, format="pid=%(process)d %(name)s: %(message)s")
    engine = create_engine(os.environ["DATABASE_URL"])
    configure_sqlite(engine)
    config = SchedulerConfig(polling_interval=timedelta(milliseconds=200))
    scheduler = Scheduler(engine, [record], config)
    app = Flask(__name__)
    init_app(app, scheduler)
    init_app(app, scheduler)  # a second call changes nothing

    @app.get("/pid")
    def pid() -> dict[str, int]:
        return {"pid": os.getpid()}

    @app.post("/record/<name>")
    def schedule_record(name: str) -> dict[str, int]:
        scheduler.schedule(engine, record.instance(name, name))
        return {"pid": os.getpid()}

    return app
