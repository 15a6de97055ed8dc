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
from tests._cli import cli_env, invoke, invoke_all, one_error_line, run, start
from tests._postgres import PostgresCluster

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
    runs = invoke_all(
        ("executions", "--state", "sideways"),
        ("executions", "--limit", "0"),
        ("demo", "--duration", "0"),
        ("admin", APP, "--port", "70000"),
        ("db", "upgrade"),  # no --url, no DATABASE_URL
        ("no-such-command",),
    )
    for done in runs:
        assert done.returncode == 2, (done.args, done.stderr)
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
