"""``sqla-scheduler pause``, ``resume`` and ``run-now``: control from a shell."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, update

from sqla_scheduler import Scheduler, one_time, recurring
from tests.support import migrated_url
from tests.support.cli import cli_env, invoke, one_error_line

LATER = datetime.now(timezone.utc) + timedelta(days=1)

mail = one_time("mail")(lambda ctx: None)
hourly = recurring("hourly", "CRON|0 0 * * * ?")(lambda ctx: None)


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database with a mail execution due tomorrow."""
    db_url = migrated_url(request, tmp_path)
    engine = create_engine(db_url)
    try:
        Scheduler(engine, [mail]).schedule(engine, mail.instance("m1", at=LATER))
    finally:
        engine.dispose()
    return db_url


def _client(url: str) -> Any:
    return Scheduler(create_engine(url), [mail, hourly])


def test_pause_and_resume(url: str) -> None:
    env = cli_env(DATABASE_URL=url)
    done = invoke("pause", "mail", env=env)
    assert (done.returncode, done.stdout) == (0, "paused mail\n"), done.stderr
    again = invoke("pause", "mail", env=env)
    assert (again.returncode, again.stdout) == (0, "mail was paused already\n")
    client = _client(url)
    assert client.paused_tasks(client.engine) == frozenset({"mail"})
    done = invoke("resume", "mail", "--url", url)
    assert (done.returncode, done.stdout) == (0, "resumed mail\n"), done.stderr
    assert invoke("resume", "mail", "--url", url).stdout == "mail was not paused\n"
    assert client.paused_tasks(client.engine) == frozenset()
    client.engine.dispose()


def test_pausing_a_task_nothing_knows_says_so(url: str) -> None:
    done = invoke("pause", "mial", "--url", url)  # a typo of mail
    assert (done.returncode, done.stdout) == (0, "paused mial\n")
    assert one_error_line(done.stderr) == (
        "sqla-scheduler: warning: no execution of mial exists and no scheduler here registers "
        "it (--app names one); is the name right? It stays paused until `sqla-scheduler "
        "resume mial`"
    )
    known = invoke("pause", "mail", "--url", url)  # an execution of it exists
    assert (known.returncode, known.stdout, known.stderr) == (0, "paused mail\n", "")


def test_run_now(url: str) -> None:
    done = invoke("run-now", "mail", "m1", "--url", url)
    assert (done.returncode, done.stdout) == (0, "mail/m1 is due now\n"), done.stderr
    client = _client(url)
    execution = client.get_execution(client.engine, "mail", "m1")
    client.engine.dispose()
    assert execution is not None
    assert execution.execution_time < LATER - timedelta(hours=23)
    missing = invoke("run-now", "hourly", "--url", url)  # its row is not registered yet
    assert missing.returncode == 1
    assert one_error_line(missing.stderr) == (
        "sqla-scheduler: no execution hourly/recurring that is not running: nothing was changed"
    )


def test_cancel_removes_one_not_running_and_asks_a_running_one_to_stop(url: str) -> None:
    client = _client(url)
    client.schedule(client.engine, mail.instance("m2", at=LATER))
    with client.engine.begin() as conn:  # m2 runs in a worker named w1
        conn.execute(
            update(client.table)
            .where(client.table.c.task_instance == "m2")
            .values(picked=True, picked_by="w1")
        )
    done = invoke("cancel", "mail", "m1", "--url", url)
    assert (done.returncode, done.stdout) == (0, "cancelled mail/m1\n"), done.stderr
    asked = invoke("cancel", "mail", "m2", "--url", url)
    assert (asked.returncode, asked.stdout) == (0, "asked w1 to stop mail/m2\n"), asked.stderr
    assert client.get_execution(client.engine, "mail", "m1") is None
    running = client.get_execution(client.engine, "mail", "m2")
    client.engine.dispose()
    assert running is not None
    assert running.stop_requested_at is not None  # its worker records the outcome
    missing = invoke("cancel", "mail", "m1", "--url", url)
    assert missing.returncode == 1
    assert one_error_line(missing.stderr) == (
        "sqla-scheduler: no execution mail/m1: nothing was cancelled"
    )


def test_bad_task_names_are_usage_errors(url: str) -> None:
    done = invoke("pause", "x" * 101, "--url", url)
    assert done.returncode == 2
    assert "task name" in one_error_line(done.stderr)
