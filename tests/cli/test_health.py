"""``sqla-scheduler health`` and the function behind it, ``health.check``, on each database."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, column, create_engine, table, update

from sqla_scheduler import MissingTableError, metadata, migrate
from sqla_scheduler._migration_steps import STEP_OF_REVISION
from sqla_scheduler.health import Health, check
from tests.support import empty_databases
from tests.support.cli import INVOCATIONS, cli_env, invoke, one_error_line, run

HEAD = migrate.heads()[0]
#: The revision before the head: a schema one migration behind.
PREVIOUS = str(migrate.script_directory().get_revision(HEAD).down_revision)
#: This version's newest step: the head's.
LATEST = STEP_OF_REVISION[HEAD]
UNREACHABLE = "postgresql+psycopg://nobody@127.0.0.1:1/none"


@pytest.fixture(params=["postgresql", "sqlite", "mariadb"])
def new_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """Makes empty databases (dropped at teardown) and returns their URLs; an empty SQLite
    file is there to be found."""
    with empty_databases(request, request.param, tmp_path, sqlite_file=True) as make:
        yield make


def _with(url: str, change: Callable[[Engine], None]) -> str:
    engine = create_engine(url)
    try:
        change(engine)
    finally:
        engine.dispose()
    return url


def test_health_exits_0_at_head_and_1_otherwise(new_database: Callable[[], str]) -> None:
    at_head = _with(new_database(), migrate.upgrade)
    behind = _with(new_database(), lambda e: migrate.upgrade(e, PREVIOUS))
    empty = new_database()
    made_by_create_all = _with(new_database(), metadata.create_all)
    index = metadata.tables["scheduled_tasks"].indexes
    missing_an_index = _with(
        new_database(),
        lambda e: (metadata.create_all(e), next(i for i in index if "due" in str(i.name)).drop(e)),
    )
    ok, behind_run, empty_run, unreachable_run, create_all_run, index_run = (
        invoke("health", "--url", url)
        for url in (at_head, behind, empty, UNREACHABLE, made_by_create_all, missing_an_index)
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == f"the schema is at step {LATEST} of {LATEST} ({migrate.VERSION_TABLE})\n"
    assert ok.stderr == ""

    assert behind_run.returncode == 1
    assert one_error_line(behind_run.stderr) == (
        f"sqla-scheduler: the schema is behind, at step {LATEST - 1} of {LATEST} "
        f"({migrate.VERSION_TABLE}): run `sqla-scheduler db upgrade`"
    )
    assert empty_run.returncode == 1
    assert "the table 'scheduled_tasks' does not exist in" in one_error_line(empty_run.stderr)
    assert unreachable_run.returncode == 1
    assert "cannot reach the database" in one_error_line(unreachable_run.stderr)

    # No step is recorded anywhere: the table itself is compared with the model.
    assert create_all_run.returncode == 0, create_all_run.stderr
    assert create_all_run.stdout.startswith(
        f"the table matches step {LATEST}, this version's newest (no step is recorded in "
    ), create_all_run.stdout
    assert index_run.returncode == 1
    line = one_error_line(index_run.stderr)
    assert f"the table differs from step {LATEST}, this version's newest" in line, line
    assert "add_index ix_scheduled_tasks_due" in line, line


@pytest.mark.parametrize("invocation", list(INVOCATIONS))
def test_health_reads_database_url(invocation: str, pg_url: str) -> None:
    done = run("health", invocation=invocation, env=cli_env(DATABASE_URL=pg_url))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"the schema is at step {LATEST} of {LATEST} (")


def test_health_of_a_sqlite_file_that_is_not_there_creates_none(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.db"
    done = invoke("health", "--url", f"sqlite:///{missing}")
    assert done.returncode == 1
    assert "nowhere.db' does not exist" in one_error_line(done.stderr)
    assert not missing.exists()


def test_check_tells_what_it_found(new_database: Callable[[], str]) -> None:
    url = _with(new_database(), lambda e: migrate.upgrade(e, PREVIOUS))
    assert check(url) == Health(
        healthy=False,
        reason=f"the schema is behind, at step {LATEST - 1} of {LATEST} "
        f"({migrate.VERSION_TABLE}): run `sqla-scheduler db upgrade`",
        step=LATEST - 1,
        latest=LATEST,
        current=(PREVIOUS,),
        heads=(HEAD,),
        version_table=migrate.VERSION_TABLE,
    )
    engine = create_engine(url)
    try:
        migrate.upgrade(engine)
        assert check(engine).healthy
        assert check(engine).current == (HEAD,)
        # A revision this version does not know: a newer version upgraded the schema, and
        # this one runs on it (each step is additive), as during a rolling deploy.
        versions = table(migrate.VERSION_TABLE, column("version_num"))
        with engine.begin() as conn:
            conn.execute(update(versions).values(version_num="0123456789ab"))
        found = check(engine)
        assert found.healthy
        assert found.reason == (
            f"the schema is ahead of step {LATEST}, this version's newest: "
            f"{migrate.VERSION_TABLE} records revision 0123456789ab, which this version does "
            "not know; a newer version upgraded it, and this one runs on it (each migration "
            "step is additive)"
        )
        assert (found.step, found.latest) == (None, LATEST)
        # The newer version recorded its step beside the tables: the step is told.
        recorded = table("scheduled_tasks_schema", column("step"))
        with engine.begin() as conn:
            conn.execute(update(recorded).values(step=LATEST + 1))
        found = check(engine)
        assert found.healthy
        assert found.reason == (
            f"the schema is ahead, at step {LATEST + 1} (scheduled_tasks_schema), past "
            f"step {LATEST}, this version's newest: a newer version upgraded it, and this one "
            "runs on it (each migration step is additive)"
        )
        assert found.step == LATEST + 1
    finally:
        engine.dispose()
    with pytest.raises(MissingTableError):
        check(new_database())


@pytest.mark.parametrize("name", ["a\x00b", "lone \udc80", 7])
def test_check_refuses_a_name_no_database_holds_before_connecting(
    name: object, tmp_path: Path
) -> None:
    """Refused before any connection (the SQLite file is not even looked for)."""
    with pytest.raises(ValueError, match=r"^name .* (NUL|lone surrogate|not text)"):
        check(f"sqlite:///{tmp_path / 'none.db'}", name=name)  # type: ignore[arg-type]
    assert not (tmp_path / "none.db").exists()


def test_health_reads_the_config_keys_of_the_environment_as_a_worker_does(pg_url: str) -> None:
    """A misspelt variable is refused (exit 2, naming the nearest key), not ignored; the
    table the environment names is the one checked."""
    typo = invoke("health", "--url", pg_url, env=cli_env(SQLA_SCHEDULER_POLING_INTERVAL="1s"))
    assert typo.returncode == 2
    line = one_error_line(typo.stderr)
    assert "SQLA_SCHEDULER_POLING_INTERVAL" in line, line
    assert "SQLA_SCHEDULER_POLLING_INTERVAL" in line, line  # the name meant
    bad = invoke("health", "--url", pg_url, env=cli_env(SQLA_SCHEDULER_CONCURRENCY="many"))
    assert bad.returncode == 2
    assert "SQLA_SCHEDULER_CONCURRENCY" in one_error_line(bad.stderr)
    elsewhere = invoke("health", "--url", pg_url, env=cli_env(SQLA_SCHEDULER_TABLE_NAME="jobs"))
    assert elsewhere.returncode == 1
    assert "the table 'jobs' does not exist in" in one_error_line(elsewhere.stderr)
    fine = invoke("health", "--url", pg_url, env=cli_env(SQLA_SCHEDULER_CONCURRENCY="4"))
    assert fine.returncode == 0, fine.stderr


def test_health_speaks_of_steps_as_db_current_does(new_database: Callable[[], str]) -> None:
    """Issue 46, item 8: `health` named Alembic revision ids, where `db current` says
    `step 16 of 16`. Tables that the application's own Alembic history manages (no version
    table records the scheduler's revisions) are judged by the step recorded beside them,
    as `db current` reads it, not by comparing the table with this version's model (which a
    newer version's step would fail)."""
    url = _with(new_database(), migrate.upgrade)
    migrate.adopt(url)  # the application's own history manages them now
    recorded = table("scheduled_tasks_schema", column("step"))
    runs = []
    for step in (LATEST, LATEST - 1, LATEST + 1):
        _with(url, lambda e, step=step: _set_step(e, recorded, step))
        runs.append(invoke("health", "--url", url))
    at, behind, ahead = runs
    assert (at.returncode, at.stderr) == (0, ""), at.stderr
    assert at.stdout == f"the schema is at step {LATEST} of {LATEST} (scheduled_tasks_schema)\n"
    assert behind.returncode == 1
    assert one_error_line(behind.stderr) == (
        f"sqla-scheduler: the schema is behind, at step {LATEST - 1} of {LATEST} "
        "(scheduled_tasks_schema): run `sqla-scheduler alembic revision`, then `alembic "
        "upgrade head`"
    )
    assert ahead.returncode == 0, ahead.stderr
    assert ahead.stdout.startswith(
        f"the schema is ahead, at step {LATEST + 1} (scheduled_tasks_schema), past step "
        f"{LATEST}, this version's newest"
    ), ahead.stdout


def _set_step(engine: Engine, recorded: Any, step: int) -> None:
    with engine.begin() as conn:
        conn.execute(update(recorded).values(step=step))


def test_health_json_is_one_object(new_database: Callable[[], str]) -> None:
    """Issue 46, item 8: `health --json` prints one JSON object, healthy or not, with the
    exit status of the command without it; what stops the check is one line on stderr."""
    at_head = _with(new_database(), migrate.upgrade)
    behind = _with(new_database(), lambda e: migrate.upgrade(e, PREVIOUS))
    ok, late, empty = (
        invoke("health", "--url", url, "--json") for url in (at_head, behind, new_database())
    )
    assert (ok.returncode, ok.stderr) == (0, ""), ok.stderr
    assert json.loads(ok.stdout) == {
        "healthy": True,
        "reason": f"the schema is at step {LATEST} of {LATEST} ({migrate.VERSION_TABLE})",
        "step": LATEST,
        "latest": LATEST,
        "version_table": migrate.VERSION_TABLE,
        "current": [HEAD],
        "heads": [HEAD],
        "node": None,
    }
    assert (late.returncode, late.stderr) == (1, "")
    found = json.loads(late.stdout)
    assert (found["healthy"], found["step"], found["latest"]) == (False, LATEST - 1, LATEST)
    assert found["reason"].startswith("the schema is behind, at step"), found
    assert empty.returncode == 1
    assert empty.stdout == ""
    assert "the table 'scheduled_tasks' does not exist in" in one_error_line(empty.stderr)
