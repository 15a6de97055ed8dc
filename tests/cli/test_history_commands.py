"""``sqla-scheduler history`` and ``requeue``: the history table from the command line."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy import create_engine

from sqla_scheduler import ManualClock, Scheduler, SchedulerConfig, one_time
from tests.support import migrated_url
from tests.support.cli import cli_env, invoke, one_error_line

NOW = datetime.now(timezone.utc).replace(microsecond=0)


def _decline(ctx: Any) -> None:
    raise RuntimeError(f"card [bold]declined[/bold] for {ctx.instance_id}")


@pytest.fixture(params=["sqlite", "postgresql", "mariadb"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A migrated database whose history holds: one abandoned execution (``c1``, with its
    payload), two failed attempts of ``c2``, and an old failure from two days ago."""
    db_url = migrated_url(request, tmp_path)
    engine = create_engine(db_url)
    clock = ManualClock(NOW - timedelta(days=2))
    once = one_time("charge", max_retries=0)(_decline)
    retried = one_time("refund", max_retries=5)(_decline)
    scheduler = Scheduler(
        engine,
        [once, retried],
        SchedulerConfig(retry_base_delay=timedelta(seconds=1), scheduler_name="worker-9"),
        clock=clock,
    )
    try:
        scheduler.schedule(engine, retried.instance("old"))
        anyio.run(scheduler.run_due)
        scheduler.cancel(engine, "refund", "old")
        clock.set(NOW)
        scheduler.schedule(engine, once.instance("c1", {"cents": 2599}))
        scheduler.schedule(engine, retried.instance("c2"))
        anyio.run(scheduler.run_due)
        clock.advance(timedelta(seconds=2))
        anyio.run(scheduler.run_due)
    finally:
        engine.dispose()
    return db_url


def test_lists_entries_newest_first_as_a_table(url: str) -> None:
    done = invoke("history", env=cli_env(DATABASE_URL=url))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].split()[:5] == ["id", "task", "instance", "outcome", "finished"]
    rows = [line.split(maxsplit=8) for line in lines[2:]]
    assert [(r[1], r[2], r[3]) for r in rows] == [
        ("refund", "c2", "failed"),
        ("refund", "c2", "failed"),
        ("charge", "c1", "abandoned"),
        ("refund", "old", "failed"),
    ]
    assert [int(r[0]) for r in rows] == sorted((int(r[0]) for r in rows), reverse=True)
    assert rows[0][6:8] == ["2", "worker-9"]  # attempt, picked by
    # the error's first line as written: rich markup in it is not interpreted
    assert rows[2][8].rstrip() == "RuntimeError: card [bold]declined[/bold] for c1"


def test_filters_and_json(url: str) -> None:
    done = invoke("history", "--url", url, "--outcome", "abandoned", "--json")
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout)
    assert (entry["task_name"], entry["instance_id"], entry["data"]) == (
        "charge",
        "c1",
        {"cents": 2599},
    )
    assert entry["error"].startswith("RuntimeError: card [bold]declined[/bold] for c1\n")
    assert entry["duration_seconds"] == 0.0
    assert entry["payload_version"] == 1
    by_task = json.loads(invoke("history", "--url", url, "--task", "refund", "--json").stdout)
    assert {e["instance_id"] for e in by_task} == {"c2", "old"}
    recent = json.loads(invoke("history", "--url", url, "--since", "1h", "--json").stdout)
    assert {e["instance_id"] for e in recent} == {"c1", "c2"}
    since = (NOW - timedelta(hours=1)).replace(tzinfo=None).isoformat()
    assert json.loads(invoke("history", "--url", url, "--since", since, "--json").stdout) == recent
    one = invoke("history", "--url", url, "--instance", "c2", "--limit", "1")
    assert one.returncode == 0
    assert "only the newest 1 are shown" in one.stderr


def test_bad_filters_are_usage_errors(url: str) -> None:
    done = invoke("history", "--url", url, "--since", "last tuesday")
    assert done.returncode == 2
    assert one_error_line(done.stderr) == (
        "sqla-scheduler: --since: 'last tuesday' is neither a duration such as 1h nor an ISO "
        "date and time"
    )
    assert invoke("history", "--url", url, "--outcome", "lost").returncode == 2


def test_requeue_runs_an_abandoned_execution_again(url: str) -> None:
    (entry,) = json.loads(
        invoke("history", "--url", url, "--outcome", "abandoned", "--json").stdout
    )
    done = invoke("requeue", str(entry["id"]), "--url", url)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"requeued charge/c1 (history entry {entry['id']})\n"
    listed = json.loads(invoke("executions", "--url", url, "--json").stdout)
    c1 = next(e for e in listed if e["instance_id"] == "c1")
    assert (c1["data"], c1["consecutive_failures"]) == ({"cents": 2599}, 0)

    again = invoke("requeue", str(entry["id"]), "--url", url)
    assert again.returncode == 1
    assert one_error_line(again.stderr) == (
        "sqla-scheduler: an execution charge/c1 is already scheduled; cancel it first to "
        f"requeue history entry {entry['id']}"
    )


def test_requeue_says_why_it_cannot(url: str) -> None:
    failed = json.loads(invoke("history", "--url", url, "--outcome", "failed", "--json").stdout)
    done = invoke("requeue", str(failed[0]["id"]), "--url", url)
    assert done.returncode == 1
    assert "is failed: only abandoned and undecodable entries" in one_error_line(done.stderr)
    missing = invoke("requeue", "999999", "--url", url)
    assert missing.returncode == 1
    assert one_error_line(missing.stderr) == "sqla-scheduler: there is no history entry 999999"
    assert invoke("requeue", "zero", "--url", url).returncode == 2


def test_without_a_database_it_says_how_to_give_one() -> None:
    done = invoke("history", env=cli_env())
    assert done.returncode == 2
    assert "no database: give --url URL, set DATABASE_URL" in done.stderr
