"""Every command fails the same way: an exit status and one line on stderr, no traceback.

0 success, 2 bad usage (a URL that does not parse, a database other than PostgreSQL and SQLite,
a bad MODULE:ATTR),
1 a runtime failure (an unreachable database, a missing table, an app that raises).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sqla_scheduler import migrate
from sqla_scheduler._migration_steps import LATEST, STEPS
from tests.support.cli import cli_env, invoke, invoke_all, one_error_line, run, start
from tests.support.servers.postgres import PostgresCluster

UNREACHABLE = "postgresql+psycopg://nobody@127.0.0.1:1/none"
APP = "tests.cli.app:scheduler"


@pytest.mark.slow
def test_failures_exit_with_one_line(pg_cluster: PostgresCluster, tmp_path: Path) -> None:
    """Slow by nature: the commands that load an application (``--app``, ``worker``,
    ``admin``) or start a demo run as a dozen real processes, each most of a second of CPU
    to start, which also shows that the exit status and the one line on stderr are the
    process's own. The other commands run in this process."""
    not_migrated = pg_cluster.url("postgres")  # reachable, but without the table
    missing_file = tmp_path / "nowhere.db"
    cases: list[tuple[tuple[str, ...], dict[str, str], int, str]] = [
        # a bad URL, from --url or DATABASE_URL
        (("db", "upgrade", "--url", "nonsense://x"), {}, 2, "bad database URL nonsense://x"),
        (("db", "current"), {"DATABASE_URL": "not a url"}, 2, "bad database URL"),
        (
            ("executions", "--url", "nonsense://x"),
            {},
            2,
            "supports PostgreSQL, SQLite, MariaDB and",
        ),
        (("executions", "--url", "oracle://u@localhost/db"), {}, 2, "not 'oracle'"),
        (("executions", "--url", "postgresql+pg8000://u@localhost/db"), {}, 1, "database driver"),
        (("demo", "--database-url", "nonsense://x"), {}, 2, "bad database URL"),
        # an unreachable database
        (("db", "upgrade", "--url", UNREACHABLE), {}, 1, "cannot reach the database"),
        (("db", "downgrade", "base", "--url", UNREACHABLE), {}, 1, "cannot reach the database"),
        (("executions",), {"DATABASE_URL": UNREACHABLE}, 1, "cannot reach the database"),
        (("worker", APP), {"DATABASE_URL": UNREACHABLE}, 1, "cannot reach the database"),
        (("demo", "--database-url", UNREACHABLE), {}, 1, "cannot reach the database"),
        (("result", "t", "i", "--wait", "60"), {"DATABASE_URL": UNREACHABLE}, 1, "cannot reach"),
        # a missing table
        (
            ("executions", "--url", not_migrated),
            {},
            1,
            "the table 'scheduled_tasks' does not exist in postgresql+psycopg://",
        ),
        (
            ("executions", "--app", APP),
            {"DATABASE_URL": not_migrated},
            1,
            "does not exist in postgresql+psycopg://postgres@127.0.0.1",
        ),
        (("worker", APP), {"DATABASE_URL": not_migrated}, 1, "run `sqla-scheduler db upgrade`"),
        # --wait looks the table up first: it fails at once, not after its timeout
        (
            ("result", "t", "i", "--url", not_migrated, "--wait", "60"),
            {},
            1,
            "the table 'scheduled_tasks' does not exist in postgresql+psycopg://",
        ),
        (
            ("result", "t", "i", "--url", f"sqlite:///{missing_file}", "--wait", "60"),
            {},
            1,
            "nowhere.db' does not exist, nor then does the table 'scheduled_tasks'",
        ),
        (
            ("executions", "--url", f"sqlite:///{missing_file}"),
            {},
            1,
            "nowhere.db' does not exist, nor then does the table 'scheduled_tasks'",
        ),
        # an application that cannot be imported, or raises while it is
        (("executions", "--app", "no_such_app:scheduler"), {}, 2, "cannot import module"),
        (("executions", "--app", "tests.cli.app"), {}, 2, "expected MODULE:ATTR"),
        (("worker", "no_such_app:scheduler"), {}, 2, "cannot import module 'no_such_app'"),
        (("admin", "no_such_app:scheduler"), {}, 2, "cannot import module 'no_such_app'"),
        (
            ("executions", "--app", "tests.cli.broken_app:scheduler"),
            {},
            1,
            "cannot load tests.cli.broken_app:scheduler: RuntimeError: the settings file is "
            "missing (`python -c 'import tests.cli.broken_app'` shows the traceback)",
        ),
        (("worker", "tests.cli.broken_app:scheduler"), {}, 1, "RuntimeError: the settings file"),
        # usage the command itself refuses
        (("executions",), {}, 2, "no database: give --url URL, set DATABASE_URL"),
        (("executions", "--url", "sqlite://", "--state", "orphaned"), {}, 2, "needs --app"),
    ]
    # the processes start first and start up while the other commands run in this one
    procs = [
        (args, start(*args, env=cli_env(**env)), code, text)
        for args, env, code, text in cases
        if _needs_a_process(args)
    ]
    assert len(procs) >= 8
    try:
        for args, env, code, text in cases:
            if not _needs_a_process(args):
                done = invoke(*args, env=cli_env(**env))
                assert done.returncode == code, (args, done.stderr)
                assert text in one_error_line(done.stderr), (args, done.stderr)
        for args, proc, code, text in procs:
            _out, err = proc.communicate(timeout=60)
            assert proc.returncode == code, (args, err)
            assert text in one_error_line(err), (args, err)
    finally:
        for _args, proc, _code, _text in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert not missing_file.exists()


def _needs_a_process(args: tuple[str, ...]) -> bool:
    """The command imports an application (which reads DATABASE_URL as it is imported, once
    per process), or runs a worker, an admin server or the demo."""
    return args[0] in {"worker", "admin", "demo"} or "--app" in args


def test_usage_errors_found_by_click_exit_2(tmp_path: Path) -> None:
    """A value an option or argument does not take is one line; what click finds missing or
    unknown, its usage line and error."""
    bad_values = invoke_all(
        ("executions", "--state", "sideways"),
        ("executions", "--limit", "0"),
        ("demo", "--duration", "0"),
        ("admin", APP, "--port", "70000"),
    )
    for done in bad_values:
        assert done.returncode == 2, (done.args, done.stderr)
        command, option = done.args[1], done.args[-2]
        assert one_error_line(done.stderr).startswith(f"sqla-scheduler: {command} {option}: ")
    missing_or_unknown = invoke_all(
        ("db", "upgrade"),  # no --url, no DATABASE_URL
        ("requeue",),
        ("no-such-command",),
        ("executions", "--no-such-option"),
    )
    for done in missing_or_unknown:
        assert done.returncode == 2, (done.args, done.stderr)
        assert done.stderr.startswith("Usage: sqla-scheduler "), (done.args, done.stderr)
        assert "Error:" in done.stderr, (done.args, done.stderr)
        assert "Traceback" not in done.stderr


def test_database_url_is_read_when_no_url_is_given(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    env = cli_env(DATABASE_URL=url)
    upgraded = invoke("db", "upgrade", env=env)
    assert upgraded.returncode == 0, upgraded.stderr
    assert migrate.current(url) == migrate.heads()
    listed = invoke("executions", env=env)
    assert (listed.returncode, listed.stdout.strip()) == (0, "no executions")


def test_a_missing_trio_is_named_with_its_extra(tmp_path: Path) -> None:
    hidden = tmp_path / "without_trio" / "trio"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text('raise ImportError("trio is not installed here")\n')
    env = cli_env(DATABASE_URL=f"sqlite:///{tmp_path / 'app.db'}")
    env["PYTHONPATH"] = os.pathsep.join([str(hidden.parent), env["PYTHONPATH"]])

    done = run("worker", APP, "--backend", "trio", env=env)

    assert done.returncode == 2, done.stderr
    assert "pip install 'sqla-scheduler[trio]'" in one_error_line(done.stderr)


def test_a_value_a_command_does_not_take_is_one_line_saying_what_it_takes(tmp_path: Path) -> None:
    """Issue 46, item 8: `requeue abc` answered with click's usage lines and "Invalid value
    for 'ID': 'abc' is not a valid integer range"; `db downgrade 12` (a step, as `db
    current` counts them) with a traceback. One line names the command, the argument or
    option, the value and what it takes."""
    url = f"sqlite:///{tmp_path / 'app.db'}"
    migrate.upgrade(url)
    step_12 = STEPS[11].revision
    cases = [
        (
            ("requeue", "abc", "--url", url),
            "requeue ID: 'abc' is not the id of a history entry: give the number "
            "`sqla-scheduler history` lists in its id column, e.g. `sqla-scheduler requeue 42`",
        ),
        (("requeue", "0", "--url", url), "requeue ID: '0' is not the id of a history entry: "),
        (
            ("executions", "--url", url, "--limit", "x"),
            f"executions --limit: 'x' is not a whole number from 1 to {2**63 - 1}",
        ),
        (
            ("executions", "--url", url, "--state", "sideways"),
            "executions --state: 'sideways' is not one of 'all', 'scheduled', 'due', "
            "'running', 'failing', 'orphaned'",
        ),
        (
            ("health", "--url", url, "--node-heartbeat-interval", "soon"),
            "health --node-heartbeat-interval: 'soon' is not a duration (try '250ms', "
            "'10s', '5m', '1h' or '14d')",
        ),
        (
            ("db", "downgrade", "12", "--url", url),
            f"db downgrade REVISION: '12' is a step, not a revision: step 12 is revision "
            f"{step_12} (sqla-scheduler db downgrade {step_12})",
        ),
        (
            ("db", "upgrade", "abc", "--url", url),
            "db upgrade REVISION: 'abc' is not a revision of the scheduler's migrations: give "
            f"heads (the newest step) or a revision id, such as {STEPS[-1].revision} for "
            f"step {LATEST}",
        ),
    ]
    for args, expected in cases:
        done = invoke(*args)
        assert done.returncode == 2, (args, done.stderr)
        assert one_error_line(done.stderr).startswith(f"sqla-scheduler: {expected}"), args
    # a value from the environment says which variable it came from
    env = cli_env(SQLA_SCHEDULER_HEALTH_PORT="x")
    done = invoke("worker", APP, env=env)
    assert done.returncode == 2, done.stderr
    assert one_error_line(done.stderr) == (
        "sqla-scheduler: worker --health-port: 'x' is not a whole number from 0 to 65535 "
        "(read from SQLA_SCHEDULER_HEALTH_PORT)"
    )
