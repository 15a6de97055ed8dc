"""``sqla-scheduler executions``: the scheduled executions, and which are due, running,
failing or orphaned."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import click

from sqla_scheduler._limits import BIGINT_MAX
from sqla_scheduler.cli._app import _client_url
from sqla_scheduler.cli._errors import _database_errors, _fail
from sqla_scheduler.cli._params import _TEXT, _URL_HELP, _env_option, _read_url_option, _Whole
from sqla_scheduler.cli._tables import _age, _error_line, _print_table, _progress_cell, _utc

if TYPE_CHECKING:
    from sqla_scheduler.executions import Execution
    from sqla_scheduler.scheduler import Scheduler


_STATES = ("all", "scheduled", "due", "running", "failing", "orphaned")


@click.command("executions")
@click.option("--url", envvar="DATABASE_URL", help=f"{_URL_HELP[:-1]}, or --app's engine.")
@click.option(
    "--state",
    type=click.Choice(_STATES),
    default="all",
    show_default=True,
    help="Which executions: scheduled (not running), due, running, failing (latest failure "
    "first), orphaned (task not registered in --app), or all.",
)
@click.option(
    "--task", "task_name", type=_TEXT, metavar="NAME", help="Only executions of this task."
)
@click.option(
    "--limit",
    type=_Whole(1, BIGINT_MAX),
    default=100,
    show_default=True,
    help="List at most N executions.",
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list with every field.")
@_env_option(
    "--app",
    "spec",
    metavar="MODULE:ATTR",
    envvar="APP",
    help="The application's Scheduler: its table and registered tasks are used (needed for "
    "--state orphaned), and its engine unless --url is given.",
)
@_read_url_option
def executions(
    url: str | None,
    state: str,
    task_name: str | None,
    limit: int,
    as_json: bool,
    spec: str | None,
    read_url: str | None,
) -> None:
    """List scheduled executions: what is due, running, failing or orphaned.

    Prints a table (task, instance, execution time in UTC, state, picked by, heartbeat age,
    progress, consecutive failures, priority, the first line of the last error), or with
    --json every field of each execution, the last error's full text and traceback and the
    progress's fraction, message and time among them. A group's callback that waits for its
    members is "waiting", with no execution time. Progress is a running handler's latest
    report (ctx.report_progress): its percent and the start of its message.
    """
    from sqla_scheduler.executions import list_executions

    if state == "orphaned" and spec is None:
        _fail(
            "--state orphaned needs --app MODULE:ATTR: only the application's scheduler "
            "knows which tasks are registered",
            2,
        )
    url, scheduler = _client_url(url, spec, read_url)
    with _database_errors(url):
        found = list_executions(
            url,
            state,  # type: ignore[arg-type]  # one of _STATES
            scheduler=scheduler,
            task_name=task_name,
            limit=limit + 1,  # one more tells whether there are more
        )
    more, found = len(found) > limit, found[:limit]
    if as_json:
        click.echo(json.dumps([e.to_json() for e in found], indent=2))
    else:
        known = frozenset(scheduler.tasks) if scheduler is not None else None
        _print_executions(found, known)
        if more:
            click.echo(f"(only the first {limit} are shown; raise --limit to see more)", err=True)
    if not found and task_name is not None:
        _say_which_tasks_have_executions(url, scheduler, task_name)


#: The most task names the note on a task without executions lists.
_TASK_NAMES_SHOWN = 20


def _say_which_tasks_have_executions(
    url: str | None, scheduler: Scheduler | None, task_name: str
) -> None:
    """On stderr, when ``task_name`` has no execution at all (a typo, most often): say so,
    and name the tasks that have some."""
    from sqla_scheduler import _store
    from sqla_scheduler._statements import statements_on
    from sqla_scheduler.executions import connected

    with _database_errors(url), connected(url, scheduler) as (client, conn):
        if client.executions(conn, task_name=task_name, limit=1):
            return  # it has executions, none in the state asked for
        statements = statements_on(conn, client.table)
        names = _store.seen_task_names(conn, statements, limit=_TASK_NAMES_SHOWN + 1)
    note = f"sqla-scheduler: no execution of task {task_name!r} exists"
    if not names:
        click.echo(f"{note}, nor of any other task", err=True)
        return
    shown = ", ".join(names[:_TASK_NAMES_SHOWN])
    if len(names) > _TASK_NAMES_SHOWN:
        shown += f" (the first {_TASK_NAMES_SHOWN} by name)"
    click.echo(f"{note}; tasks with executions: {shown}", err=True)


def _print_executions(found: list[Execution], known: frozenset[str] | None) -> None:
    now = datetime.now(timezone.utc)
    _print_table(
        [
            ("task", "left"),
            ("instance", "left"),
            ("execution time (UTC)", "left"),
            ("state", "left"),
            ("picked by", "left"),
            ("heartbeat age", "right"),
            ("progress", "left"),
            ("failures", "right"),
            ("priority", "right"),
            ("last error", "left"),
        ],
        (
            [
                e.task_name,
                e.instance_id,
                "-" if e.waiting else _utc(e.execution_time),
                _state(e, now, known),
                e.picked_by or "-",
                _age(now - e.last_heartbeat) if e.picked and e.last_heartbeat else "-",
                _progress_cell(e.progress),
                str(e.consecutive_failures),
                str(e.priority),
                _error_line(e.last_error),
            ]
            for e in found
        ),
        empty="no executions",
    )


def _state(e: Execution, now: datetime, known: frozenset[str] | None) -> str:
    """``Execution.status``: ``waiting`` for a group's callback that waits for its
    members, whose execution time is a placeholder in year 9999, not a time it will run."""
    return e.status(now, known)
