"""``sqla-scheduler db``: upgrade, downgrade, adopt and current, over the scheduler's own
migrations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

from sqla_scheduler.cli._errors import _database_errors, _fail
from sqla_scheduler.cli._params import _url_option, _version_table
from sqla_scheduler.cli._root import _Group

if TYPE_CHECKING:
    from sqla_scheduler import migrate


@click.group(cls=_Group)
def db() -> None:
    """Create, upgrade or inspect the scheduler's table (its own migrations)."""


_version_table_option = _version_table("to tell which way manages the scheduler's tables.")


@db.command("upgrade")
@_url_option
@_version_table_option
@click.argument("revision", default="heads")
def db_upgrade(url: str, version_table: str, revision: str) -> None:
    """Upgrade the scheduler's table to REVISION (default: heads), creating it if needed.

    Refused for tables that your Alembic project manages (its own history or the
    sqla_scheduler branch): upgrade those there."""
    from sqla_scheduler import migrate

    with _database_errors(url), _revision_errors("upgrade", revision):
        _refuse_managed_elsewhere(migrate.status(url, version_table=version_table), "upgrade")
        migrate.upgrade(url, revision)
        click.echo(f"upgraded to {', '.join(migrate.current(url)) or 'base'}")


@db.command("downgrade")
@_url_option
@_version_table_option
@click.argument("revision")
def db_downgrade(url: str, version_table: str, revision: str) -> None:
    """Downgrade the scheduler's table to REVISION ("base" drops it).

    Refused for tables that your Alembic project manages: downgrade those there."""
    from sqla_scheduler import migrate

    with _database_errors(url), _revision_errors("downgrade", revision):
        _refuse_managed_elsewhere(migrate.status(url, version_table=version_table), "downgrade")
        migrate.downgrade(url, revision)
        click.echo(f"downgraded to {', '.join(migrate.current(url)) or 'base'}")


@contextmanager
def _revision_errors(verb: str, revision: str) -> Iterator[None]:
    """A REVISION that names no revision of the package's migrations is bad usage: one line
    saying what it takes (a step number, as ``db current`` counts, gets its revision)."""
    from alembic.util import CommandError

    from sqla_scheduler._migration_steps import LATEST, STEP_OF_REVISION

    try:
        yield
    except CommandError as exc:
        if f"'{revision}'" not in str(exc):  # about the database's revision, not this one
            _fail(f"db {verb}: {exc}")
        where = f"db {verb} REVISION: {revision!r}"
        of_step = {step: rev for rev, step in STEP_OF_REVISION.items()}
        if revision.isascii() and revision.isdigit() and int(revision) <= LATEST:
            step = int(revision)
            target = of_step[step] if step else "base"
            _fail(
                f"{where} is a step, not a revision: step {step} is "
                f"{f'revision {target}' if step else 'base'} "
                f"(sqla-scheduler db {verb} {target})",
                2,
            )
        takes = "heads (the newest step)" if verb == "upgrade" else "base (no tables)"
        _fail(
            f"{where} is not a revision of the scheduler's migrations: give {takes} or a "
            f"revision id, such as {of_step[LATEST]} for step {LATEST}",
            2,
        )


def _refuse_managed_elsewhere(status: migrate.Status, verb: str) -> None:
    """One line and exit 1 when an Alembic project manages the tables, not ``db``."""
    if status.way == "application":
        _fail(
            f"the scheduler's tables are at step {status.step} through your application's "
            f"own Alembic history: {verb} them there (sqla-scheduler alembic revision, then "
            f"alembic {verb} head), not with sqla-scheduler db {verb}"
        )
    if status.way == "branch":
        _fail(
            f"the scheduler's tables are at step {status.step} through the sqla_scheduler "
            f"branch of your Alembic project (revision {status.revision}): {verb} them there "
            f"(alembic {verb} {'heads' if verb == 'upgrade' else 'sqla_scheduler@-1'}), not "
            f"with sqla-scheduler db {verb}"
        )


@db.command("adopt")
@_url_option
@_version_table_option
def db_adopt(url: str, version_table: str) -> None:
    """Hand the scheduler's tables over to your application's own Alembic history, from
    db upgrade or the sqla_scheduler branch, keeping every row.

    Records the step the tables are at beside them and takes the scheduler's revisions out
    of the version tables; the tables are not touched. First take
    sqla_scheduler:migrations/versions out of version_locations; afterwards run
    sqla-scheduler alembic revision and alembic upgrade head (which then changes nothing)."""
    from sqla_scheduler import migrate

    with _database_errors(url):
        before, after = migrate.adopt(url, version_table=version_table)
    if before == after:
        click.echo(f"nothing to hand over: {after.describe(version_table)}")
        return
    click.echo(f"was {before.describe(version_table)}")
    click.echo(f"now {after.describe(version_table)}")


@db.command("current")
@_url_option
@_version_table_option
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object with every field.")
def db_current(url: str, version_table: str, as_json: bool) -> None:
    """Show the step the scheduler's tables are at, and which way manages them (this
    command's db upgrade, the sqla_scheduler branch of your Alembic project, or your
    application's own Alembic history)."""
    from sqla_scheduler import migrate

    with _database_errors(url):
        status = migrate.status(url, version_table=version_table)
    if as_json:
        click.echo(json.dumps(_status_json(status, version_table), indent=2))
        return
    click.echo(status.describe(version_table))


def _status_json(status: migrate.Status, version_table: str) -> dict[str, Any]:
    from sqla_scheduler import migrate

    where = {"standalone": migrate.VERSION_TABLE, "branch": version_table}
    return {
        "step": status.step,
        "latest": status.latest,
        "way": status.way,
        "revision": status.revision,
        "version_table": where.get(status.way),
    }
