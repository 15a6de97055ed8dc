"""``sqla-scheduler result``: a kept result from the command line, printed or as JSON, and
waited for with ``--wait``."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import Engine, create_engine, text

from sqla_scheduler import ManualClock, Scheduler, SchedulerConfig, migrate, one_time
from tests.support import wait_for
from tests.support.cli import cli_env, invoke, invoke_all, one_error_line, start

NOW = datetime(2030, 5, 17, 12, 0, 3, 250000, tzinfo=timezone.utc)

#: What ``render-report`` returns: markup in it must reach the terminal as written.
VALUE = {"url": "/r/r-1", "pages": 12, "title": "Q3 [bold]report[/bold] <b>"}


@one_time("render-report", keep_result=True)
def render_report(ctx: Any) -> dict[str, Any]:
    return {**VALUE, "url": f"/r/{ctx.instance_id}"}


def _decline(ctx: Any) -> None:
    raise RuntimeError(f"card [bold]declined[/bold] for {ctx.instance_id}")


charge = one_time("charge", keep_result=True, max_retries=0)(_decline)
plain = one_time("plain")(lambda ctx: {"kept": False})


def _scheduler(engine: Engine) -> Scheduler:
    return Scheduler(
        engine,
        [render_report, charge, plain],
        SchedulerConfig(history="none"),
        clock=ManualClock(NOW),
    )


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database whose results hold a success of ``render-report``/``r-1`` and
    the abandoned ``charge``/``c-1``; ``plain``/``p-1``, which keeps none, ran too."""
    if request.param == "sqlite":
        db_url = f"sqlite:///{tmp_path / 'app.db'}"
        migrate.upgrade(db_url)
    else:
        db_url = request.getfixturevalue("mariadb_url" if request.param == "mariadb" else "pg_url")
    engine = create_engine(db_url)
    scheduler = _scheduler(engine)
    try:
        scheduler.schedule(engine, render_report.instance("r-1"))
        scheduler.schedule(engine, charge.instance("c-1"))
        scheduler.schedule(engine, plain.instance("p-1"))
        assert anyio.run(scheduler.run_due) == 3
    finally:
        engine.dispose()
    return db_url


def test_prints_a_value_as_json_and_an_error_in_full(url: str) -> None:
    value, error = invoke_all(
        ("result", "render-report", "r-1", "--url", url),
        ("result", "charge", "c-1", "--url", url),
    )
    assert value.returncode == 0, value.stderr
    assert value.stdout.splitlines() == [
        "task:     render-report",
        "instance: r-1",
        "outcome:  succeeded",
        "finished: 2030-05-17T12:00:03Z",
        "value:    {",
        '            "url": "/r/r-1",',
        '            "pages": 12,',
        '            "title": "Q3 [bold]report[/bold] <b>"',
        "          }",
    ]
    assert error.returncode == 0, error.stderr
    lines = error.stdout.splitlines()
    assert lines[2:5] == [
        "outcome:  abandoned",
        "finished: 2030-05-17T12:00:03Z",
        # as written: rich markup in it is not interpreted
        "error:    RuntimeError: card [bold]declined[/bold] for c-1",
    ]
    assert lines[5] == "          Traceback (most recent call last):"  # the whole error
    assert "value:" not in error.stdout


def test_json_is_the_results_to_dict(url: str) -> None:
    done = invoke("result", "charge", "c-1", "--json", env=cli_env(DATABASE_URL=url))
    assert done.returncode == 0, done.stderr
    engine = create_engine(url)
    try:
        kept = _scheduler(engine).result(engine, "charge", "c-1")
    finally:
        engine.dispose()
    assert kept is not None
    assert json.loads(done.stdout) == kept.to_dict()
    assert json.loads(done.stdout)["finished_at"] == NOW.isoformat()
    value = json.loads(invoke("result", "render-report", "r-1", "--url", url, "--json").stdout)
    assert (value["outcome"], value["value"], value["error"]) == (
        "succeeded",
        {**VALUE, "url": "/r/r-1"},
        None,
    )


def test_no_result_exits_1_saying_why(url: str) -> None:
    why = "it has not finished, its task does not keep results, or it was pruned"
    for task, instance in [("plain", "p-1"), ("render-report", "never"), ("gone", "x")]:
        done = invoke("result", task, instance, "--url", url)
        assert done.returncode == 1
        assert one_error_line(done.stderr) == (
            f"sqla-scheduler: no result of task {task!r}, instance {instance!r}: {why}"
        )
        assert done.stdout == ""
    waited = invoke("result", "render-report", "never", "--url", url, "--wait", "0.05")
    assert waited.returncode == 1
    assert one_error_line(waited.stderr) == (
        "sqla-scheduler: no result of task 'render-report', instance 'never' after waiting "
        f"0.05s: {why}"
    )


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("", "i-1"), "task name must not be empty"),
        (("t" * 101, "i-1"), "is 101 characters long; the limit is 100"),
        (("render-report", ""), "task 'render-report': instance id must not be empty"),
        (("render-report", "i" * 256), "is 256 characters long; the limit is 255"),
        (
            ("render-report", "i-1", "--wait", "0"),
            "result --wait: '0' is not a number of seconds more than 0 and at most 86400",
        ),
        (("render-report", "i-1", "--wait", "nan"), "'nan' is not a number"),
        (("render-report",), "Missing argument 'INSTANCE'"),
    ],
)
def test_bad_input_is_a_usage_error(args: tuple[str, ...], says: str) -> None:
    """Refused before any database is reached: the URL names none that exists."""
    done = invoke("result", *args, "--url", "postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert done.returncode == 2, done.stderr
    assert says in done.stderr


def test_wait_prints_the_result_once_the_execution_finishes(pg_url: str) -> None:
    """A process waits with ``--wait`` and ``--app``: it is listening (its LISTEN seen in
    PostgreSQL's pg_stat_activity) before the execution is even scheduled, and prints the
    result once the execution has run."""
    waiting = start(
        *("result", "render-report", "r-9", "--app", "tests.cli.app:scheduler"),
        *("--wait", "60", "--json"),
        env=cli_env(DATABASE_URL=pg_url),
    )
    engine = create_engine(pg_url)
    try:

        def listening() -> bool:
            assert waiting.poll() is None, waiting.communicate()
            with engine.connect() as conn:
                found = conn.scalar(
                    text(
                        "select count(*) from pg_stat_activity "
                        "where datname = current_database() and query like 'LISTEN %'"
                    )
                )
            return bool(found)

        anyio.run(wait_for, listening)
        scheduler = _scheduler(engine)
        scheduler.schedule(engine, render_report.instance("r-9"))
        assert anyio.run(scheduler.run_due) == 1
        out, err = waiting.communicate(timeout=30)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
        engine.dispose()
    assert waiting.returncode == 0, err
    printed = json.loads(out)
    assert (printed["task_name"], printed["instance_id"], printed["outcome"]) == (
        "render-report",
        "r-9",
        "succeeded",
    )
    assert printed["value"] == {**VALUE, "url": "/r/r-9"}
