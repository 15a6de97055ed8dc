"""``sqla-scheduler pause``, ``resume``, ``run-now`` and ``cancel``: each one change, in
one transaction on the scheduler's table."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sqla_scheduler.cli._app import _client_url
from sqla_scheduler.cli._errors import _database_errors, _fail
from sqla_scheduler.cli._params import _TEXT, _task_name, _with_client_options

if TYPE_CHECKING:
    from sqla_scheduler.executions import Execution
    from sqla_scheduler.scheduler import Scheduler


T = TypeVar("T")


def _on_client(url: str | None, spec: str | None, act: Callable[[Scheduler, Any], T]) -> T:
    """``act(client, connection)`` in one transaction on the database of --url/--app."""
    from sqla_scheduler.executions import connected

    db_url, scheduler = _client_url(url, spec)
    with _database_errors(db_url), connected(db_url, scheduler) as (client, conn):
        return act(client, conn)


@click.command("pause")
@click.argument("task_name", type=_TEXT, metavar="TASK")
@_with_client_options
def pause(task_name: str, url: str | None, spec: str | None) -> None:
    """Pause TASK for every scheduler sharing the table, until `resume TASK`.

    No scheduler picks its executions meanwhile (those running finish); scheduling it
    still works. The pause is kept in the database: it outlives restarts.
    """
    name = _task_name(task_name)

    def act(client: Scheduler, conn: Any) -> tuple[bool, bool]:
        known = name in client.tasks or bool(client.executions(conn, task_name=name, limit=1))
        return client.pause(conn, name), known

    paused, known = _on_client(url, spec, act)
    if paused:
        click.echo(f"paused {name}")
    else:
        click.echo(f"{name} was paused already")
    if not known:  # a typo pauses nothing the user meant: say so, on stderr
        click.echo(
            f"sqla-scheduler: warning: no execution of {name} exists and no scheduler here "
            "registers it (--app names one); is the name right? It stays paused until "
            f"`sqla-scheduler resume {name}`",
            err=True,
        )


@click.command("resume")
@click.argument("task_name", type=_TEXT, metavar="TASK")
@_with_client_options
def resume(task_name: str, url: str | None, spec: str | None) -> None:
    """Let the schedulers pick TASK again; what came due meanwhile runs now (a recurring
    run missed while paused, once)."""
    name = _task_name(task_name)
    if _on_client(url, spec, lambda client, conn: client.resume(conn, name)):
        click.echo(f"resumed {name}")
    else:
        click.echo(f"{name} was not paused")


@click.command("run-now")
@click.argument("task_name", type=_TEXT, metavar="TASK")
@click.argument("instance_id", type=_TEXT, metavar="[INSTANCE]", default="recurring")
@_with_client_options
def run_now(task_name: str, instance_id: str, url: str | None, spec: str | None) -> None:
    """Make the execution TASK/INSTANCE due now, keeping its payload and schedule.

    INSTANCE defaults to `recurring`, a recurring task's one row. Exits 1 when there is no
    such execution or a scheduler is running it.
    """
    name = _task_name(task_name)
    if not _on_client(url, spec, lambda client, conn: client.run_now(conn, name, instance_id)):
        _fail(f"no execution {name}/{instance_id} that is not running: nothing was changed")
    click.echo(f"{name}/{instance_id} is due now")


@click.command("cancel")
@click.argument("task_name", type=_TEXT, metavar="TASK")
@click.argument("instance_id", type=_TEXT, metavar="INSTANCE")
@_with_client_options
def cancel(task_name: str, instance_id: str, url: str | None, spec: str | None) -> None:
    """Cancel the execution TASK/INSTANCE, running or not.

    One that no scheduler runs is removed at once. One that runs is asked to stop: the
    process running it learns of it within a second, its handler is cancelled (async) or
    sees ctx.cancelled (sync), and the execution ends `cancelled`. Exits 1 when there is
    no such execution.
    """
    name = _task_name(task_name)

    def act(client: Scheduler, conn: Any) -> Execution | None:
        found: Execution | None = client.get_execution(conn, name, instance_id)
        if found is None or not client.cancel(conn, name, instance_id):
            return None
        return found

    found = _on_client(url, spec, act)
    if found is None:
        _fail(f"no execution {name}/{instance_id}: nothing was cancelled")
    elif found.picked:
        click.echo(f"asked {found.picked_by} to stop {name}/{instance_id}")
    else:
        click.echo(f"cancelled {name}/{instance_id}")
