"""Every number and name the command line takes is checked by its option's type: a usage
error (exit 2) naming the option and the range or the problem, before anything connects
(issue 29, defects 5, 6, 8 and 11). In this process: no database is reached."""

from __future__ import annotations

import pytest

from tests._cli import cli_env, invoke

UNREACHABLE = "postgresql+psycopg://nobody@127.0.0.1:1/none"
BIGINT = "1<=x<=9223372036854775807"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("requeue", str(2**63)), f"Invalid value for 'ID': {2**63} is not in the range {BIGINT}"),
        (("requeue", "\uff15"), "Invalid value for 'ID': '\uff15' is not a whole number in ASCII"),
        (("requeue", "\u0661\u0662"), "'\u0661\u0662' is not a whole number in ASCII digits"),
        (
            ("history", "--limit", str(2**70)),
            f"Invalid value for '--limit': {2**70} is not in the range {BIGINT}",
        ),
        (
            ("executions", "--limit", str(2**63)),
            f"Invalid value for '--limit': {2**63} is not in the range {BIGINT}",
        ),
        (
            ("worker", "tests.cli.app:scheduler", "--concurrency", "100000"),
            "Invalid value for '--concurrency': 100000 is not in the range 1<=x<=1000",
        ),
        (
            ("worker", "tests.cli.app:scheduler", "--concurrency", str(2**64)),
            f"Invalid value for '--concurrency': {2**64} is not in the range 1<=x<=1000",
        ),
        (
            ("admin", "tests.cli.app:scheduler", "--port", "\uff18\uff10"),
            "'\uff18\uff10' is not a whole number in ASCII digits",
        ),
        (("demo", "--duration", "nan"), "Invalid value for '--duration': 'nan' is not a number"),
        (("demo", "--duration", "inf"), "'--duration': inf is not in the range 0<x<=86400"),
        (("demo", "--duration", "-1"), "'--duration': -1.0 is not in the range 0<x<=86400"),
        (("demo", "--duration", "1e400"), "'--duration': inf is not in the range 0<x<=86400"),
        (("demo", "--duration", "\uff15"), "'\uff15' is not a number in ASCII digits"),
    ],
)
def test_a_number_out_of_range_is_a_usage_error(args: tuple[str, ...], message: str) -> None:
    done = invoke(*args, env=cli_env(DATABASE_URL=UNREACHABLE))
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    assert message in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (("run-now", "job", "a\udcff"), "'[INSTANCE]'"),
        (("run-now", "a\udcff"), "'TASK'"),
        (("pause", "a\udcff"), "'TASK'"),
        (("resume", "a\udcff"), "'TASK'"),
        (("history", "--task", "a\udcff"), "'--task'"),
        (("history", "--instance", "a\udcff"), "'--instance'"),
        (("executions", "--task", "a\udcff"), "'--task'"),
        (("health", "--name", "a\udcff"), "'--name'"),
    ],
)
def test_a_name_in_bytes_that_are_not_utf8_is_a_usage_error(
    args: tuple[str, ...], option: str
) -> None:
    """Bytes that are not UTF-8 on the command line reach Python as lone surrogates, which
    no driver sends: refused by the option, not a driver's traceback."""
    done = invoke(*args, env=cli_env(DATABASE_URL=UNREACHABLE))
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr
    assert f"Invalid value for {option}" in done.stderr, done.stderr
    assert "'a\\udcff' contains a lone surrogate" in done.stderr, done.stderr


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
