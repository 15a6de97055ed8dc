"""``sqla-scheduler health``: the database reachable, its schema at a step this version
runs on and, with --name, a scheduler alive."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import click

from sqla_scheduler.cli._app import _config_from_env
from sqla_scheduler.cli._errors import _database_errors, _fail
from sqla_scheduler.cli._params import (
    _TEXT,
    _env_option,
    _interval_option,
    _url_option,
    _version_table,
)

if TYPE_CHECKING:
    from sqla_scheduler.health import Health


@click.command("health")
@_url_option
@_version_table(
    "when sqla-scheduler db upgrade's (sqla_scheduler_alembic_version) records nothing."
)
@_env_option(
    "--name",
    type=_TEXT,
    metavar="NAME",
    envvar="SCHEDULER_NAME",
    help="Also require the scheduler named NAME (its scheduler_name) to be alive: recorded "
    "in the nodes table within three node heartbeat intervals. Beside a worker whose name "
    "SQLA_SCHEDULER_SCHEDULER_NAME sets, the probe checks that worker.",
)
@_interval_option
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON object with every field, healthy or not (the exit status is the same).",
)
def health(
    url: str, version_table: str, name: str | None, interval: timedelta, as_json: bool
) -> None:
    """Check that the database is reachable and its schema at a step this version runs on
    (its newest, or past it) and, with --name, that the scheduler of that name is alive.

    For readiness probes and deploy scripts: exit 0, printing what was found, or 1 with one
    line on stderr saying why not (unreachable, no table, the schema behind this version's
    newest step, no such scheduler, or one last seen too long ago). Steps are counted as
    db current counts them. SQLA_SCHEDULER_* variables are read as a worker reads them
    (SQLA_SCHEDULER_TABLE_NAME and _SCHEMA name the table checked); an unknown name exits
    2. For liveness, use the worker's --health-port and GET /livez, which does not ask the
    database.
    """
    from sqla_scheduler.health import check

    config = _config_from_env()
    with _database_errors(url):
        found = check(
            url,
            version_table=version_table,
            name=name,
            node_heartbeat_interval=interval,
            table_name=config.table_name,
            schema=config.schema,
        )
    if as_json:
        click.echo(json.dumps(_health_json(found), indent=2))
        sys.exit(0 if found.healthy else 1)
    if not found.healthy:
        _fail(found.reason)
    click.echo(found.reason)


def _health_json(found: Health) -> dict[str, Any]:
    return {
        "healthy": found.healthy,
        "reason": found.reason,
        "step": found.step,
        "latest": found.latest,
        "version_table": found.version_table,
        "current": list(found.current),
        "heads": list(found.heads),
        "node": None if found.node is None else found.node.to_json(),
    }
