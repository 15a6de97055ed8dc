"""Every command's ``--help`` says what it does."""

from __future__ import annotations

from importlib.metadata import version

import click
import pytest

import sqla_scheduler
from sqla_scheduler.cli import cli
from tests.support.cli import INVOCATIONS, invoke_all, run

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
    ("db", "current"): [
        "Show the step the scheduler's tables are at, and which way manages", "--json",
    ],
    ("health",): [
        "Check that the database is reachable and its schema at a step this version runs on",
        "--json",
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
    ("cancel",): [
        "Cancel the execution TASK/INSTANCE, running or not", "asked to stop",
        "ctx.cancelled", "ends `cancelled`", "--url", "--app", "DATABASE_URL",
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


#: The groups whose ``--help`` lists commands.
LISTINGS = [(), ("db",), ("alembic",)]


def _listed(help_text: str) -> dict[str, str]:
    """The Commands section of a group's help: each command's summary, its lines joined."""
    section = help_text.split("\nCommands:\n", 1)[1]
    found: dict[str, str] = {}
    name = ""
    for line in section.splitlines():
        if not line.strip():
            break
        if not line.startswith("   "):  # a command's first line, indented by two
            name, _, summary = line.strip().partition(" ")
            found[name] = summary.strip()
        else:  # the summary wrapped onto the next line
            found[name] += " " + line.strip()
    return found


def test_command_listings_show_each_summary_whole() -> None:
    """Issue 46, item 8: cut at 80 columns, `health` was "Check that the database is
    reachable and its schema one..."; each listing shows the first sentence of each
    command's help whole, wrapped."""
    runs = invoke_all(*[(*group, "--help") for group in LISTINGS])
    for group, done in zip(LISTINGS, runs, strict=True):
        assert done.returncode == 0, done.stderr
        section = done.stdout.split("\nCommands:\n", 1)[1]
        cut = [line for line in section.splitlines() if line.rstrip().endswith("...")]
        assert not cut, done.stdout
        command: click.Command = cli
        for name in group:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        assert isinstance(command, click.Group)
        listed = _listed(done.stdout)
        assert set(listed) == set(command.commands), done.stdout
        for name, summary in listed.items():
            paragraph = " ".join((command.commands[name].help or "").partition("\n\n")[0].split())
            assert summary.endswith("."), (group, name, summary)
            assert paragraph.startswith(summary), (group, name, summary, paragraph)
            rest = paragraph[len(summary) :]
            assert not rest or (rest[0] == " " and not rest[1].islower()), (group, name, summary)
