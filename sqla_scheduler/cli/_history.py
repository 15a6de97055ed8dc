"""``sqla-scheduler history`` and ``requeue``: the finished attempts, and an abandoned or
undecodable one scheduled again."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import click

from sqla_scheduler._limits import BIGINT_MAX
from sqla_scheduler.cli._app import _client_url
from sqla_scheduler.cli._errors import _database_errors, _fail
from sqla_scheduler.cli._params import _TEXT, _read_url_option, _Whole, _with_client_options
from sqla_scheduler.cli._tables import _error_line, _print_table, _utc


class _HistoryId(_Whole):
    """The id of a history entry: the number ``sqla-scheduler history`` lists first."""

    def __init__(self) -> None:
        super().__init__(1, BIGINT_MAX)

    def expected(self, value: object) -> str:
        return (
            f"{str(value)!r} is not the id of a history entry: give the number "
            "`sqla-scheduler history` lists in its id column, e.g. `sqla-scheduler requeue 42`"
        )


_OUTCOMES = ("succeeded", "failed", "abandoned", "dead", "undecodable", "snoozed", "cancelled")


def _since(value: str | None) -> datetime | None:
    """``--since``: a duration back from now (``1h``, ``2d``) or an ISO date and time (UTC
    when it names no offset)."""
    from sqla_scheduler._durations import parse_duration

    if value is None:
        return None
    try:
        return datetime.now(timezone.utc) - parse_duration(value)
    except (ValueError, OverflowError):
        pass
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        _fail(f"--since: {value!r} is neither a duration such as 1h nor an ISO date and time", 2)
    return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)


@click.command("history")
@_with_client_options
@click.option("--task", "task_name", type=_TEXT, metavar="NAME", help="Only entries of this task.")
@click.option(
    "--instance", "instance_id", type=_TEXT, metavar="ID", help="Only entries of this instance."
)
@click.option("--outcome", type=click.Choice(_OUTCOMES), help="Only entries with this outcome.")
@click.option(
    "--since",
    metavar="WHEN",
    help="Only entries finished since WHEN: a duration back from now (1h, 2d) or an ISO "
    "date and time (UTC unless it names an offset).",
)
@click.option(
    "--limit", type=_Whole(1, BIGINT_MAX), default=100, show_default=True, help="At most N."
)
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list with every field.")
@_read_url_option
def history(
    url: str | None,
    spec: str | None,
    task_name: str | None,
    instance_id: str | None,
    outcome: str | None,
    since: str | None,
    limit: int,
    as_json: bool,
    read_url: str | None,
) -> None:
    """List finished attempts from the history table, newest first.

    What is there depends on the scheduler's `history` setting: failures (the default:
    failed, abandoned, dead and undecodable attempts), all (successes too) or none.
    Abandoned and undecodable entries keep their payload: `requeue ID` runs them again.
    """
    from sqla_scheduler.history import list_history

    after = _since(since)
    db_url, scheduler = _client_url(url, spec, read_url)
    with _database_errors(db_url):
        found = list_history(
            db_url,
            scheduler=scheduler,
            task_name=task_name,
            instance_id=instance_id,
            outcome=outcome,  # type: ignore[arg-type]  # one of _OUTCOMES
            since=after,
            limit=limit + 1,  # one more tells whether there are more
        )
    more, found = len(found) > limit, found[:limit]
    if as_json:
        click.echo(json.dumps([_entry_json(e) for e in found], indent=2))
        return
    _print_history(found)
    if more:
        click.echo(f"(only the newest {limit} are shown; raise --limit to see more)", err=True)


def _entry_json(entry: Any) -> dict[str, Any]:
    def when(at: datetime | None) -> str | None:
        return None if at is None else at.isoformat()

    duration = entry.duration
    return {
        "id": entry.id,
        "task_name": entry.task_name,
        "instance_id": entry.instance_id,
        "outcome": entry.outcome,
        "execution_time": when(entry.execution_time),
        "started_at": when(entry.started_at),
        "finished_at": when(entry.finished_at),
        "duration_seconds": None if duration is None else duration.total_seconds(),
        "picked_by": entry.picked_by,
        "attempt": entry.attempt,
        "priority": entry.priority,
        "payload_version": entry.payload_version,
        "error": entry.error,
        "data": entry.data,
    }


def _print_history(found: list[Any]) -> None:
    _print_table(
        [
            ("id", "right"),
            ("task", "left"),
            ("instance", "left"),
            ("outcome", "left"),
            ("finished (UTC)", "left"),
            ("took", "right"),
            ("attempt", "right"),
            ("picked by", "left"),
            ("error", "left"),
        ],
        (
            [
                str(e.id),
                e.task_name,
                e.instance_id,
                e.outcome,
                _utc(e.finished_at),
                "-" if e.duration is None else f"{e.duration.total_seconds():.3f}s",
                str(e.attempt),
                e.picked_by or "-",
                _error_line(e.error),
            ]
            for e in found
        ),
        empty="no history entries",
    )


@click.command("requeue")
@click.argument("history_id", metavar="ID", type=_HistoryId())
@_with_client_options
def requeue(history_id: int, url: str | None, spec: str | None) -> None:
    """Schedule an abandoned or undecodable execution again, due now, with its payload.

    ID is the number `history` lists. The entry stays in history; the execution runs as
    a new one (its failures counted from zero). Exits 1, saying why, when there is no such
    entry, it is of another outcome, or an execution with its key is already scheduled.
    """
    from sqla_scheduler.history import requeue as requeue_entry

    db_url, scheduler = _client_url(url, spec)
    with _database_errors(db_url):
        try:
            entry = requeue_entry(db_url, history_id, scheduler=scheduler)
        except LookupError as exc:
            _fail(str(exc.args[0]))
    click.echo(f"requeued {entry.task_name}/{entry.instance_id} (history entry {history_id})")
