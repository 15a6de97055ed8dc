"""Every command's ``--help`` says what it does."""

from __future__ import annotations

from importlib.metadata import version

import pytest

import sqla_scheduler
from tests._cli import INVOCATIONS, invoke_all, run

HELP = {
    (): [
        "persistent, cluster-safe task scheduler", "db", "health", "worker", "executions",
        "result", "nodes", "admin", "demo", "alembic", "--version",
    ],
    ("alembic",): ["Bring the scheduler's tables into the application's own Alembic history"],
    ("alembic", "revision"): [
        "Write a revision on the application's head", "--version N", "the package's newest",
        "sqla_scheduler.alembic.upgrade(op, version=N)", "writes nothing", "alembic merge heads",
        "-c, --config FILE", "alembic.ini", "-m, --message", "--table-name", "--schema",
    ],
    ("db",): ["Create, upgrade or inspect the scheduler's table", "upgrade", "current"],
    ("db", "upgrade"): ["Upgrade the scheduler's table to REVISION", "--url", "DATABASE_URL"],
    ("db", "downgrade"): ["Downgrade the scheduler's table", '"base" drops it'],
    ("db", "current"): ["Show the step the scheduler's tables are at, and which way manages"],
    ("health",): [
        "Check that the database is reachable and its schema one this version runs on",
        "--url", "DATABASE_URL", "--version-table", "probes", "--name",
        "--node-heartbeat-interval", "SQLA_SCHEDULER_NODE_HEARTBEAT_INTERVAL",
        "SQLA_SCHEDULER_VERSION_TABLE", "SQLA_SCHEDULER_SCHEDULER_NAME",
    ],
    ("worker",): [
        "Run the Scheduler at MODULE:ATTR until SIGINT or SIGTERM", "--concurrency",
        "SQLA_SCHEDULER_APP", "SQLA_SCHEDULER_CONCURRENCY", "SQLA_SCHEDULER_SCHEDULER_NAME",
        "SQLA_SCHEDULER_BACKEND", "SQLA_SCHEDULER_LOG_LEVEL", "SQLA_SCHEDULER_POLLING_INTERVAL",
    ],
    ("executions",): [
        "List scheduled executions", "--state", "orphaned", "--task", "--limit", "--json",
        "--app", "DATABASE_URL", "SQLA_SCHEDULER_APP",
    ],
    ("result",): [
        "Print the kept result of the execution TASK/INSTANCE", "keep_result=True",
        "--wait SECONDS", "--json", "--app", "--read-url", "DATABASE_URL", "SQLA_SCHEDULER_APP",
        "SQLA_SCHEDULER_READ_URL",
    ],
    ("nodes",): [
        "List the schedulers recorded in the nodes table, alive or stale", "--json",
        "--node-heartbeat-interval", "DATABASE_URL",
    ],
    ("admin",): [
        "admin page", "ADMIN_PASSWORD", "--host", "--port", "sqla-scheduler[admin]",
        "SQLA_SCHEDULER_APP", "SQLA_SCHEDULER_ADMIN_HOST", "SQLA_SCHEDULER_ADMIN_PORT",
        "SQLA_SCHEDULER_ADMIN_ACTIONS",
    ],
    ("demo",): [
        "Run a small shop on the scheduler", "--database-url", "--duration", "Ctrl-C",
        "`history` command", "tuned far from the defaults (polling every 200ms",
    ],
}  # fmt: skip


def test_every_command_explains_itself() -> None:
    runs = invoke_all(*[(*command, "--help") for command in HELP])
    for (command, expected), done in zip(HELP.items(), runs, strict=True):
        assert done.returncode == 0, (command, done.stderr)
        text = " ".join(done.stdout.split())  # click wraps the help text
        for phrase in expected:
            assert phrase in text, (command, phrase, done.stdout)


@pytest.mark.parametrize("invocation", list(INVOCATIONS))
def test_both_ways_of_running_it_show_the_same_help(invocation: str) -> None:
    done = run("-h", invocation=invocation)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: sqla-scheduler [OPTIONS] COMMAND [ARGS]...")


@pytest.mark.parametrize("invocation", list(INVOCATIONS))
def test_version_is_the_installed_distributions(invocation: str) -> None:
    done = run("--version", invocation=invocation)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"sqla-scheduler, version {version('sqla-scheduler')}\n"
    assert version("sqla-scheduler") == sqla_scheduler.__version__
