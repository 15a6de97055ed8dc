"""``sqla-scheduler nodes``: the schedulers recorded in the nodes table, alive or
stale."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING

import click

from sqla_scheduler.cli._errors import _database_errors
from sqla_scheduler.cli._params import _interval_option, _read_url_option, _url_option
from sqla_scheduler.cli._tables import _age, _print_table, _utc

if TYPE_CHECKING:
    from sqla_scheduler.nodes import Node


@click.command("nodes")
@_url_option
@_interval_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list with every field.")
@_read_url_option
def nodes(url: str, interval: timedelta, as_json: bool, read_url: str | None) -> None:
    """List the schedulers recorded in the nodes table, alive or stale.

    Each running scheduler records itself every node_heartbeat_interval and removes its
    row when it stops cleanly; a row last written more than three intervals ago is stale
    (its process was killed, hangs, or cannot reach the database). Prints a table (name,
    state, host, pid, started and last seen in UTC, last seen age, concurrency, running,
    version), or with --json every field of each node.
    """
    from sqla_scheduler.nodes import list_nodes

    url = read_url or url
    with _database_errors(url):
        found = list_nodes(url, node_heartbeat_interval=interval)
    if as_json:
        click.echo(json.dumps([node.to_json() for node in found], indent=2))
        return
    _print_nodes(found)


def _print_nodes(found: list[Node]) -> None:
    now = datetime.now(timezone.utc)
    _print_table(
        [
            ("name", "left"),
            ("state", "left"),
            ("host", "left"),
            ("pid", "right"),
            ("started (UTC)", "left"),
            ("last seen (UTC)", "left"),
            ("seen", "right"),
            ("concurrency", "right"),
            ("running", "right"),
            ("version", "left"),
        ],
        (
            [
                node.name,
                "alive" if node.alive else "stale",
                node.host,
                str(node.pid),
                _utc(node.started_at),
                _utc(node.last_seen),
                f"{_age(now - node.last_seen)} ago",
                str(node.concurrency),
                str(node.running),
                node.version,
            ]
            for node in found
        ),
        empty="no nodes",
    )
