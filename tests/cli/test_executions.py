"""``sqla-scheduler executions`` and the function behind it, ``list_executions``."""

from __future__ import annotations

import dataclasses
import json
import re
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import pytest
from sqlalchemy import Engine, create_engine, text, update

from sqla_scheduler import (
    Execution,
    MissingTableError,
    Scheduler,
    SchedulerConfig,
    migrate,
    one_time,
)
from sqla_scheduler.executions import list_executions
from sqla_scheduler.models import table_for
from tests.support import migrated_url, wait_for
from tests.support.cli import INVOCATIONS, cli_env, invoke, one_error_line, run

NOW = datetime.now(timezone.utc).replace(microsecond=0)
LATER = NOW + timedelta(days=1)  # still ahead however long the test session runs
#: The failing execution's error text, as a failed attempt writes it.
ERROR = (
    "app.billing.CardDeclined: card declined by the [issuer], code 51 (insufficient funds) "
    "retry later\nsecond line of the message\nTraceback (most recent call last):\n"
    '  File "app/billing.py", line 12, in charge\n    raise CardDeclined(reply)'
)
#: What the running execution's handler last reported: a fraction and a message longer
#: than the table shows, with a line break and a run of spaces in it.
PROGRESS = (0.425, "importing  rows:\n425 of 1000 from s3://exports/2030-05-17/orders.csv")


def _noop(ctx: Any) -> None:
    """The tests only list executions."""


send_email = one_time("send-email")(_noop)
charge = one_time("charge")(_noop)
gone = one_time("gone")(_noop)  # scheduled by an older release; tests.cli.app lacks it


def seed(engine: Engine) -> datetime:
    """One execution in each state: due, scheduled, failing, running (with ``PROGRESS``
    reported 30 seconds after its heartbeat), and an orphan.

    Returns the running execution's heartbeat, 90 seconds ago.
    """
    heartbeat = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(seconds=90)
    client = Scheduler(engine, tasks=[send_email, charge, gone])
    client.schedule(engine, send_email.instance("welcome-1", {"to": "ada@example.com"}))
    client.schedule(engine, send_email.instance("reminder-1", {"to": "bob@example.com"}, at=LATER))
    client.schedule(engine, charge.instance("order-7", {"cents": 2599}, at=LATER, priority=5))
    client.schedule(engine, charge.instance("order-8", {"cents": 100}))
    client.schedule(engine, gone.instance("legacy-1", None, at=NOW - timedelta(days=1)))
    table = client.table
    with engine.begin() as conn:
        conn.execute(
            update(table)
            .where(table.c.task_instance == "order-7")
            .values(
                consecutive_failures=2, last_failure=NOW - timedelta(minutes=1), last_error=ERROR
            )
        )
        conn.execute(
            update(table)
            .where(table.c.task_instance == "order-8")
            .values(
                picked=True,
                picked_by="worker-1",
                last_heartbeat=heartbeat,
                progress=PROGRESS[0],
                progress_message=PROGRESS[1],
                progress_at=heartbeat + timedelta(seconds=30),
            )
        )
    return heartbeat


class Seeded(NamedTuple):
    url: str
    heartbeat: datetime


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def seeded(request: pytest.FixtureRequest, tmp_path: Path) -> Seeded:
    """A migrated database with :func:`seed`'s executions in it."""
    db_url = migrated_url(request, tmp_path)
    engine = create_engine(db_url)
    try:
        heartbeat = seed(engine)
    finally:
        engine.dispose()
    return Seeded(db_url, heartbeat)


@pytest.fixture
def url(seeded: Seeded) -> str:
    return seeded.url


#: The table's columns, in order.
COLUMNS = [
    "task", "instance", "execution time (UTC)", "state", "picked by", "heartbeat age",
    "progress", "failures", "priority", "last error",
]  # fmt: skip


def _rows(out: str) -> dict[str, list[str]]:
    """The table's rows by instance id, each split where columns meet: a run of three
    spaces or more (a cell's text has none: the progress's white space is one space each,
    and the test's errors have none)."""
    lines = out.strip().splitlines()
    assert re.split(r" {3,}", lines[0].strip()) == COLUMNS
    rows = [re.split(r" {3,}", line.strip()) for line in lines[2:]]
    assert all(len(cells) == len(COLUMNS) for cells in rows), rows
    return {cells[1]: cells for cells in rows}


@pytest.mark.parametrize("invocation", list(INVOCATIONS))
def test_lists_executions_as_a_table(url: str, invocation: str) -> None:
    # The console script finds the database in DATABASE_URL, python -m is given --url.
    if invocation == "console-script":
        done = run("executions", invocation=invocation, env=cli_env(DATABASE_URL=url))
    else:
        done = run("executions", "--url", url, invocation=invocation)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    rows = _rows(done.stdout)
    later = LATER.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert rows["welcome-1"][:2] == ["send-email", "welcome-1"]
    assert rows["welcome-1"][3:] == ["due", "-", "-", "-", "0", "0", "-"]
    assert rows["reminder-1"][2:] == [later, "scheduled", "-", "-", "-", "0", "0", "-"]
    assert rows["order-7"][2:9] == [later, "failing", "-", "-", "-", "2", "5"]
    # the error's first line (its type and message), cut to fit
    assert rows["order-7"][9] == f"{ERROR.splitlines()[0][:79]}…"
    assert rows["order-8"][3:5] == ["running", "worker-1"]
    assert re.fullmatch(r"1m[3-5]\ds", rows["order-8"][5])  # 90s and the time the test took
    # its percent (rounded down) and its message on one line, cut to 40 characters
    assert rows["order-8"][6] == "42% importing rows: 425 of 1000 from s3…"
    # Without the application's tasks no row can be called an orphan.
    assert rows["legacy-1"][:4] == ["gone", "legacy-1", rows["legacy-1"][2], "due"]
    # Highest priority first, then earliest.
    assert next(iter(rows)) == "order-7"


def test_lists_executions_as_json(seeded: Seeded) -> None:
    done = invoke("executions", "--url", seeded.url, "--json")
    assert done.returncode == 0, done.stderr
    listed = {e["instance_id"]: e for e in json.loads(done.stdout)}
    assert set(listed) == {"welcome-1", "reminder-1", "order-7", "order-8", "legacy-1"}
    fields = {f.name for f in dataclasses.fields(Execution)}
    assert all(set(e) == fields for e in listed.values())
    running = listed["order-8"]
    assert running["task_name"] == "charge"
    assert running["data"] == {"cents": 100}
    assert running["picked"] is True
    assert running["picked_by"] == "worker-1"
    assert datetime.fromisoformat(running["last_heartbeat"]) == seeded.heartbeat
    failing = listed["order-7"]
    assert datetime.fromisoformat(failing["execution_time"]) == LATER
    assert failing["execution_time"].endswith("+00:00")
    assert (failing["consecutive_failures"], failing["priority"]) == (2, 5)
    assert failing["last_error"] == ERROR  # all of it
    assert running["last_error"] is None
    # the report whole: its fraction, its message as reported, when it was written
    progress = running["progress"]
    assert (progress["fraction"], progress["message"]) == PROGRESS
    assert datetime.fromisoformat(progress["at"]) == seeded.heartbeat + timedelta(seconds=30)
    assert progress["at"].endswith("+00:00")
    assert {e["progress"] for n, e in listed.items() if n != "order-8"} == {None}
    assert listed["legacy-1"]["data"] is None
    assert {e["payload_version"] for e in listed.values()} == {1}


def test_filters_by_state_task_and_limit(url: str) -> None:
    filters = {
        "due": ("--state", "due"),
        "running": ("--state", "running"),
        "failing": ("--state", "failing"),
        "scheduled": ("--state", "scheduled"),
        "task": ("--task", "send-email"),
        "limit": ("--limit", "1"),
    }
    runs = [
        *[invoke("executions", "--url", url, "--json", *args) for args in filters.values()],
        invoke("executions", "--url", url, "--limit", "2"),
        invoke("executions", "--url", url, "--task", "no-such-task"),
    ]
    assert all(done.returncode == 0 for done in runs), [done.stderr for done in runs]
    listed = {
        name: sorted(e["instance_id"] for e in json.loads(done.stdout))
        for name, done in zip(filters, runs[: len(filters)], strict=True)
    }
    assert listed == {
        "due": ["legacy-1", "welcome-1"],
        "running": ["order-8"],
        "failing": ["order-7"],
        "scheduled": ["legacy-1", "order-7", "reminder-1", "welcome-1"],
        "task": ["reminder-1", "welcome-1"],
        "limit": ["order-7"],  # the highest priority
    }
    more, nothing = runs[-2:]
    assert len(_rows(more.stdout)) == 2
    assert more.stderr.strip() == "(only the first 2 are shown; raise --limit to see more)"
    assert nothing.stdout.strip() == "no executions"


def test_app_tells_orphans(url: str) -> None:
    env = cli_env(DATABASE_URL=url)
    done = run("executions", "--app", "tests.cli.app:scheduler", env=env)
    assert done.returncode == 0, done.stderr
    rows = _rows(done.stdout)
    assert rows["legacy-1"][3] == "orphaned"
    assert rows["welcome-1"][3] == "due"

    orphans = run("executions", "--app", "tests.cli.app:scheduler", "--state", "orphaned", env=env)
    assert orphans.returncode == 0, orphans.stderr
    assert list(_rows(orphans.stdout)) == ["legacy-1"]

    refused = invoke("executions", "--url", url, "--state", "orphaned")
    assert refused.returncode == 2
    assert "--state orphaned needs --app MODULE:ATTR" in one_error_line(refused.stderr)


def test_app_engine_gives_way_to_an_explicit_url(url: str, tmp_path: Path) -> None:
    """With --app, the app's engine is used, unless --url is given on the command line."""
    elsewhere = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    migrate.upgrade(elsewhere)
    env = cli_env(DATABASE_URL=url)
    app = ("executions", "--app", "tests.cli.app:scheduler", "--json")
    assert len(json.loads(run(*app, env=env).stdout)) == 5
    assert json.loads(run(*app, "--url", elsewhere, env=env).stdout) == []


# --- the function -----------------------------------------------------------------------


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    migrate.upgrade(db_url)
    engine = create_engine(db_url)
    try:
        seed(engine)
    finally:
        engine.dispose()
    return db_url


def test_list_executions_reads_a_url_an_engine_or_a_scheduler(sqlite_url: str) -> None:
    by_url = list_executions(sqlite_url, "due")
    assert sorted(e.instance_id for e in by_url) == ["legacy-1", "welcome-1"]
    engine = create_engine(sqlite_url)
    try:
        assert list_executions(engine, "running")[0].picked_by == "worker-1"
        app = Scheduler(engine, tasks=[send_email, charge])
        orphans = list_executions(scheduler=app, state="orphaned")
        assert [(e.task_name, e.instance_id) for e in orphans] == [("gone", "legacy-1")]
        assert len(list_executions(scheduler=app, limit=2, offset=1)) == 2
    finally:
        engine.dispose()


def test_list_executions_needs_the_app_for_orphans(sqlite_url: str) -> None:
    with pytest.raises(ValueError, match="orphaned executions needs the application's scheduler"):
        list_executions(sqlite_url, "orphaned")


def test_list_executions_on_a_database_without_the_table(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    with pytest.raises(MissingTableError, match=r"SQLite database .*missing\.db' does not exist"):
        list_executions(f"sqlite:///{missing}")
    assert not missing.exists()  # a typo does not leave an empty database behind

    empty = tmp_path / "empty.db"
    engine = create_engine(f"sqlite:///{empty}")
    engine.connect().close()  # creates the file
    engine.dispose()
    with pytest.raises(
        MissingTableError, match=r"the table 'scheduled_tasks' does not exist .*db upgrade"
    ):
        list_executions(f"sqlite:///{empty}")


def test_a_row_no_scheduler_can_read_is_left_out(seeded: Seeded) -> None:
    """A row written by hand that cannot be loaded (issue 13, defects 2 and 3) does not
    stop the listing: the other rows are listed as before."""
    engine = create_engine(seeded.url)
    bad = {
        "postgresql": "'4000-01-01 00:00:00+00 BC'",
        "sqlite": "'0000-xx'",
        "mysql": "'0000-00-00 00:00:00'",
    }[engine.dialect.name]
    try:
        with engine.begin() as conn:
            conn.execute(
                text(f"update scheduled_tasks set execution_time = {bad} where task_instance = :i"),
                {"i": "welcome-1"},
            )
    finally:
        engine.dispose()
    done = invoke("executions", "--url", seeded.url, "--json")
    assert done.returncode == 0, done.stderr
    listed = {e["instance_id"] for e in json.loads(done.stdout)}
    assert listed == {"reminder-1", "order-7", "order-8", "legacy-1"}


def test_a_waiting_callback_is_waiting_and_json_names_its_group(tmp_path: Path) -> None:
    """A group's callback waits at a placeholder time in year 9999 until its members have
    finished: the table says ``waiting`` (no time), ``--json`` has ``awaits`` and each
    member's ``group_id``."""
    db_url = f"sqlite:///{tmp_path / 'app.db'}"
    migrate.upgrade(db_url)
    engine = create_engine(db_url)
    try:
        client = Scheduler(engine, tasks=[send_email, charge])
        group = client.schedule_group(
            engine,
            [charge.instance("order-1", {"cents": 1}, at=LATER)],
            then=send_email.instance("receipt-1", {"to": "ada@example.com"}),
        )
    finally:
        engine.dispose()
    done = invoke("executions", "--url", db_url)
    assert done.returncode == 0, done.stderr
    rows = _rows(done.stdout)
    assert rows["receipt-1"][2:4] == ["-", "waiting"]
    assert rows["order-1"][3] == "scheduled"
    assert "9999" not in done.stdout

    listed = json.loads(invoke("executions", "--url", db_url, "--json").stdout)
    by_instance = {e["instance_id"]: e for e in listed}
    assert (by_instance["receipt-1"]["awaits"], by_instance["receipt-1"]["group_id"]) == (
        group.id,
        None,
    )
    assert (by_instance["order-1"]["awaits"], by_instance["order-1"]["group_id"]) == (
        None,
        group.id,
    )
    assert by_instance["receipt-1"]["execution_time"].startswith("9999-01-01T00:00:00")


def test_a_task_without_executions_is_named_beside_those_with_some(
    url: str, tmp_path: Path
) -> None:
    """Issue 46, item 8: `--task unknown` printed "no executions" and nothing else, as for a
    task that has executions, none of them in the state asked for. On stderr, a line says
    that the task has none and which tasks do; stdout stays the listing."""
    empty = f"sqlite:///{tmp_path / 'empty.db'}"
    migrate.upgrade(empty)
    runs = [
        invoke("executions", "--url", url, "--task", "unknown"),
        invoke("executions", "--url", url, "--task", "unknown", "--json"),
        invoke("executions", "--url", url, "--task", "send-email", "--state", "running"),
        invoke("executions", "--url", empty, "--task", "unknown"),
    ]
    assert [done.returncode for done in runs] == [0] * 4, [done.stderr for done in runs]
    unknown, as_json, none_running, nothing_anywhere = runs
    hint = (
        "sqla-scheduler: no execution of task 'unknown' exists; tasks with executions: "
        "charge, gone, send-email"
    )
    assert unknown.stdout == "no executions\n"
    assert one_error_line(unknown.stderr) == hint
    assert json.loads(as_json.stdout) == []
    assert one_error_line(as_json.stderr) == hint
    # the task has executions, none running: nothing to hint at
    assert (none_running.stdout, none_running.stderr) == ("no executions\n", "")
    assert one_error_line(nothing_anywhere.stderr) == (
        "sqla-scheduler: no execution of task 'unknown' exists, nor of any other task"
    )


# --- progress ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fraction", "message", "cell"),
    [
        (0.29, None, "29%"),  # its double is just below 0.29: still 29
        (0.999, "almost", "99% almost"),  # rounded down: 100% only when it says 1
        (1, "done, writing the summary", "100% done, writing the summary"),
        (0.0, "", "0%"),
        (None, "reading the index", "reading the index"),
        (None, "\t waiting\r\nfor   the lock ", "waiting for the lock"),
        (None, "x" * 1024, "x" * 39 + "…"),
        (None, "   ", "-"),
    ],
)
def test_the_progress_column_shows_the_percent_and_the_message(
    sqlite_url: str, fraction: float | None, message: str | None, cell: str
) -> None:
    engine = create_engine(sqlite_url)
    table = table_for()
    try:
        with engine.begin() as conn:
            conn.execute(
                update(table)
                .where(table.c.task_instance == "order-8")
                .values(progress=fraction, progress_message=message)
            )
    finally:
        engine.dispose()
    done = invoke("executions", "--url", sqlite_url, "--state", "running")
    assert done.returncode == 0, done.stderr
    assert _rows(done.stdout)["order-8"][6] == cell


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database with no execution in it."""
    return migrated_url(request, tmp_path)


def test_a_running_handlers_report_is_listed_and_cleared_when_it_ends(empty_url: str) -> None:
    """A scheduler runs a handler that reports and waits; the command, in another
    connection, lists the report as it was written, then none once the attempt failed."""
    release = threading.Event()

    @one_time("import-file", max_retries=3)
    def import_file(ctx: Any) -> None:
        ctx.report_progress(0.5, "500 of 1000 rows")
        release.wait(30)
        raise RuntimeError("the attempt fails: its row stays, with no progress")

    def listed() -> dict[str, Any]:
        done = invoke("executions", "--url", empty_url, "--json")
        assert done.returncode == 0, done.stderr
        [execution] = json.loads(done.stdout)
        return dict(execution)

    engine = create_engine(empty_url)
    scheduler = Scheduler(
        engine,
        [import_file],
        SchedulerConfig(
            polling_interval=timedelta(milliseconds=20), retry_base_delay=timedelta(hours=1)
        ),
    )
    scheduler.schedule(engine, import_file.instance("2030-05-17.csv"))
    started = datetime.now(timezone.utc)
    scheduler.start()
    try:
        anyio.run(wait_for, lambda: listed()["progress"] is not None)
        progress = listed()["progress"]
        assert (progress["fraction"], progress["message"]) == (0.5, "500 of 1000 rows")
        written = datetime.fromisoformat(progress["at"])
        assert started - timedelta(seconds=1) <= written <= datetime.now(timezone.utc)
        table = invoke("executions", "--url", empty_url, "--state", "running")
        assert _rows(table.stdout)["2030-05-17.csv"][3:7:3] == ["running", "50% 500 of 1000 rows"]
        release.set()
        anyio.run(wait_for, lambda: listed()["consecutive_failures"] == 1)
    finally:
        release.set()
        scheduler.stop()
        engine.dispose()
    assert listed()["progress"] is None
    table = invoke("executions", "--url", empty_url)
    assert _rows(table.stdout)["2030-05-17.csv"][3:7:3] == ["failing", "-"]
