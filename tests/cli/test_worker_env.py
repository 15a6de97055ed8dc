"""``sqla-scheduler worker`` and the ``SQLA_SCHEDULER_*`` environment, in real processes.

A misspelt or unknown name, a bad value, or a table other than the application's exits 2
with one line naming the variable; accepted variables get as far as the database. The
precedence itself (flags > environment > module) is in
``tests/concurrency/test_worker_process.py``, with a running worker.
"""

from __future__ import annotations

from tests.support.cli import cli_env, one_error_line, start

UNREACHABLE = "postgresql+psycopg://nobody@127.0.0.1:1/none"
APP = "tests.cli.app:scheduler"


def test_the_environment_is_checked_before_the_worker_starts() -> None:
    cases: list[tuple[tuple[str, ...], dict[str, str], int, str]] = [
        (
            (APP,),
            {"SQLA_SCHEDULER_CONCURRANCY": "4"},
            2,
            "sqla-scheduler: unknown environment variable 'SQLA_SCHEDULER_CONCURRANCY' "
            "(did you mean 'SQLA_SCHEDULER_CONCURRENCY'?)",
        ),
        (
            (APP,),
            {"SQLA_SCHEDULER_LOG_LEVL": "debug"},  # near one of the command line's own
            2,
            "sqla-scheduler: unknown environment variable 'SQLA_SCHEDULER_LOG_LEVL' "
            "(did you mean 'SQLA_SCHEDULER_LOG_LEVEL'?)",
        ),
        (
            (APP,),
            {"SQLA_SCHEDULER_POLLING_INTERVAL": "soon"},
            2,
            "sqla-scheduler: SQLA_SCHEDULER_POLLING_INTERVAL: 'soon' is not a duration",
        ),
        (
            (APP,),
            {"SQLA_SCHEDULER_CONCURRENCY": "0"},
            2,
            "sqla-scheduler: SQLA_SCHEDULER_CONCURRENCY: '0' must be at least 1",
        ),
        # every number has a bound a deployment never reaches, named when it is passed
        (
            (APP,),
            {"SQLA_SCHEDULER_CONCURRENCY": "100000"},
            2,
            "sqla-scheduler: SQLA_SCHEDULER_CONCURRENCY: '100000' must be at most 1000",
        ),
        (
            (APP,),
            {"SQLA_SCHEDULER_TABLE_NAME": "other_tasks"},
            2,
            "sqla-scheduler: SQLA_SCHEDULER_TABLE_NAME: 'other_tasks' differs from the "
            "application's table_name ('scheduled_tasks')",
        ),
        # a bad value is refused even where a flag would override it
        (
            (APP, "--concurrency", "2"),
            {"SQLA_SCHEDULER_CONCURRENCY": "many"},
            2,
            "sqla-scheduler: SQLA_SCHEDULER_CONCURRENCY: 'many' is not an integer",
        ),
        # accepted: the worker gets as far as the database
        (
            (APP,),
            {
                "SQLA_SCHEDULER_TABLE_NAME": "scheduled_tasks",  # the application's own
                "SQLA_SCHEDULER_POLLING_INTERVAL": "250ms",
                "SQLA_SCHEDULER_LISTEN": "off",
                "SQLA_SCHEDULER_BACKEND": "asyncio",
                "SQLA_SCHEDULER_ADMIN_PORT": "9000",  # another command's: not unknown
            },
            1,
            "sqla-scheduler: cannot reach the database",
        ),
        ((), {"SQLA_SCHEDULER_APP": APP}, 1, "sqla-scheduler: cannot reach the database"),
    ]
    procs = [
        (
            args,
            env,
            start("worker", *args, env=cli_env(DATABASE_URL=UNREACHABLE, **env)),
            code,
            text,
        )
        for args, env, code, text in cases
    ]
    try:
        for args, env, proc, code, text in procs:
            _out, err = proc.communicate(timeout=60)
            assert proc.returncode == code, (args, env, err)
            if code == 2:
                line = one_error_line(err)
            else:  # the worker's log came first: the settings it took from the environment
                assert "Traceback" not in err, err
                line = err.strip().splitlines()[-1]
            assert line.startswith(text), (args, env, err)
    finally:
        for _args, _env, proc, _code, _text in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


def test_the_worker_logs_what_the_environment_set() -> None:
    env = {
        "SQLA_SCHEDULER_POLLING_INTERVAL": "250ms",
        "SQLA_SCHEDULER_BACKEND": "asyncio",
        "SQLA_SCHEDULER_ADMIN_PORT": "9000",  # another command's: neither unknown nor logged
    }
    proc = start("worker", APP, env=cli_env(DATABASE_URL=UNREACHABLE, **env))
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert (
        "settings from the environment: SQLA_SCHEDULER_BACKEND=asyncio, "
        "SQLA_SCHEDULER_POLLING_INTERVAL=250ms\n"
    ) in err


def test_a_bad_value_for_an_option_names_its_variable() -> None:
    proc = start(
        "worker", APP, env=cli_env(DATABASE_URL=UNREACHABLE, SQLA_SCHEDULER_BACKEND="curio")
    )
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, err
    assert "SQLA_SCHEDULER_BACKEND" in err, err
    assert "'curio' is not one of" in err, err
