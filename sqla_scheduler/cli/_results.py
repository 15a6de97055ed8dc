"""``sqla-scheduler result``: the kept result of one execution, read at once or waited
for."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from sqla_scheduler.cli._app import _client_url
from sqla_scheduler.cli._errors import _database_errors, _fail
from sqla_scheduler.cli._params import (
    _TEXT,
    _read_url_option,
    _Seconds,
    _task_name,
    _with_client_options,
)
from sqla_scheduler.cli._tables import _utc

if TYPE_CHECKING:
    from sqla_scheduler.results import Result


@click.command("result")
@click.argument("task_name", type=_TEXT, metavar="TASK")
@click.argument("instance_id", type=_TEXT, metavar="INSTANCE")
@_with_client_options
@click.option(
    "--wait",
    "wait",
    type=_Seconds(max=86400),
    metavar="SECONDS",
    help="Wait up to SECONDS (at most a day) for the result while the execution has not "
    "finished; exit 1 if there is none by then.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as a JSON object.")
@_read_url_option
def result(
    task_name: str,
    instance_id: str,
    url: str | None,
    spec: str | None,
    wait: float | None,
    as_json: bool,
    read_url: str | None,
) -> None:
    """Print the kept result of the execution TASK/INSTANCE: its outcome, when it finished,
    and the value its handler returned (as JSON) or its error.

    Tasks defined with keep_result=True, and the members of groups, keep results, for
    result_retention. Exits 1 when there is none: the execution has not finished (--wait
    waits for it), its task does not keep results, or the result was pruned.
    """
    from sqla_scheduler.results import read_result, wait_for_result

    name = _task_name(task_name)
    _instance_id(name, instance_id)
    db_url, scheduler = _client_url(url, spec, read_url)
    with _database_errors(db_url):
        if wait is None:
            found = read_result(db_url, name, instance_id, scheduler=scheduler)
        else:
            try:
                found = wait_for_result(
                    db_url, name, instance_id, scheduler=scheduler, timeout=wait
                )
            except TimeoutError:
                _fail(
                    f"no result of task {name!r}, instance {instance_id!r} after waiting "
                    f"{wait:g}s: it has not finished, its task does not keep results, or "
                    "it was pruned"
                )
    if found is None:
        _fail(
            f"no result of task {name!r}, instance {instance_id!r}: it has not finished, its "
            "task does not keep results, or it was pruned"
        )
    if as_json:
        click.echo(json.dumps(found.to_dict(), indent=2))
        return
    _print_result(found)


def _instance_id(task_name: str, instance_id: str) -> None:
    """Exit 2 unless ``instance_id`` is one ``schedule`` takes (not empty, not too long)."""
    from sqla_scheduler._checks import check_instance_id

    try:
        check_instance_id(task_name, instance_id)
    except ValueError as exc:
        _fail(str(exc), 2)


def _print_result(found: Result) -> None:
    """One field a line; the value (indented JSON) and the error (in full, with its
    traceback) continue on lines of their own, indented under it."""
    fields = [
        ("task", found.task_name),
        ("instance", found.instance_id),
        ("outcome", found.outcome),
        ("finished", _utc(found.finished_at)),
    ]
    if found.succeeded:
        fields.append(("value", json.dumps(found.value, indent=2, ensure_ascii=False)))
    if found.error is not None:
        fields.append(("error", found.error.rstrip("\n")))
    width = max(len(label) for label, _ in fields) + 2
    for label, text in fields:
        first, *rest = text.splitlines() or [""]
        click.echo(f"{label + ':':<{width}}{first}")
        for line in rest:
            click.echo(" " * width + line)
