"""Every number and name the command line takes is checked by its option's type: a usage
error (exit 2) naming the option and the range or the problem, before anything connects
(issue 29, defects 5, 6, 8 and 11). In this process: no database is reached."""

from __future__ import annotations

import pytest

from tests.support.cli import cli_env, invoke, one_error_line

UNREACHABLE = "postgresql+psycopg://nobody@127.0.0.1:1/none"
BIGINT_MAX = 2**63 - 1
HISTORY_ID = (
    "is not the id of a history entry: give the number `sqla-scheduler history` lists in its "
    "id column, e.g. `sqla-scheduler requeue 42`"
)
A_DAY = "is not a number of seconds more than 0 and at most 86400"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("requeue", str(2**63)), f"requeue ID: '{2**63}' {HISTORY_ID}"),
        (("requeue", "\uff15"), "requeue ID: '\uff15' is not a whole number in ASCII digits"),
        (("requeue", "\u0661\u0662"), "ID: '\u0661\u0662' is not a whole number in ASCII digits"),
        (
            ("history", "--limit", str(2**70)),
            f"history --limit: '{2**70}' is not a whole number from 1 to {BIGINT_MAX}",
        ),
        (
            ("executions", "--limit", str(2**63)),
            f"executions --limit: '{2**63}' is not a whole number from 1 to {BIGINT_MAX}",
        ),
        (
            ("worker", "tests.cli.app:scheduler", "--concurrency", "100000"),
            "worker --concurrency: '100000' is not a whole number from 1 to 1000",
        ),
        (
            ("worker", "tests.cli.app:scheduler", "--concurrency", str(2**64)),
            f"worker --concurrency: '{2**64}' is not a whole number from 1 to 1000",
        ),
        (
            ("admin", "tests.cli.app:scheduler", "--port", "\uff18\uff10"),
            "admin --port: '\uff18\uff10' is not a whole number in ASCII digits",
        ),
        (("demo", "--duration", "nan"), f"demo --duration: 'nan' {A_DAY}"),
        (("demo", "--duration", "inf"), f"demo --duration: 'inf' {A_DAY}"),
        (("demo", "--duration", "-1"), f"demo --duration: '-1' {A_DAY}"),
        (("demo", "--duration", "1e400"), f"demo --duration: '1e400' {A_DAY}"),
        (("demo", "--duration", "\uff15"), "'\uff15' is not a number in ASCII digits"),
    ],
)
def test_a_number_out_of_range_is_a_usage_error(args: tuple[str, ...], message: str) -> None:
    done = invoke(*args, env=cli_env(DATABASE_URL=UNREACHABLE))
    assert done.returncode == 2, done
    assert message in one_error_line(done.stderr), done.stderr


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("run-now", "job", "a\udcff"), "run-now INSTANCE"),
        (("run-now", "a\udcff"), "run-now TASK"),
        (("pause", "a\udcff"), "pause TASK"),
        (("resume", "a\udcff"), "resume TASK"),
        (("history", "--task", "a\udcff"), "history --task"),
        (("history", "--instance", "a\udcff"), "history --instance"),
        (("executions", "--task", "a\udcff"), "executions --task"),
        (("health", "--name", "a\udcff"), "health --name"),
    ],
)
def test_a_name_in_bytes_that_are_not_utf8_is_a_usage_error(
    args: tuple[str, ...], option: str
) -> None:
    """Bytes that are not UTF-8 on the command line reach Python as lone surrogates, which
    no driver sends: refused by the option, not a driver's traceback."""
    done = invoke(*args, env=cli_env(DATABASE_URL=UNREACHABLE))
    assert done.returncode == 2, done
    assert one_error_line(done.stderr) == (
        f"sqla-scheduler: {option}: 'a\\udcff' contains a lone surrogate (not valid Unicode)"
    )


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CONCURRENCY", str(2**64), f"'{2**64}' must be at most 1000"),
        ("MISSED_HEARTBEAT_LIMIT", "1001", "'1001' must be at most 1000"),
        ("POLLING_INTERVAL", "\u0661\u0662", "'\u0661\u0662' is not a duration"),
        ("SHUTDOWN_MAX_WAIT", "2d", "'2d' must be at most 1d"),
        ("SCHEDULER_NAME", "worker\x1b[2J", "'worker\\x1b[2J' contains a control character"),
    ],
)
def test_a_worker_refuses_an_environment_value_past_its_bound(
    variable: str, value: str, message: str
) -> None:
    """In this process; a real worker process refusing one is in ``test_worker_env``."""
    env = cli_env(DATABASE_URL=UNREACHABLE, **{f"SQLA_SCHEDULER_{variable}": value})
    done = invoke("worker", "tests.cli.app:scheduler", env=env)
    assert done.returncode == 2, done
    assert done.stderr.startswith(f"sqla-scheduler: SQLA_SCHEDULER_{variable}: {message}")
    assert done.stderr.count("\n") == 1, done.stderr
