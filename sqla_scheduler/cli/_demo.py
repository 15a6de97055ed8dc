"""``sqla-scheduler demo``: a small shop run on the scheduler, its executions shown
live."""

from __future__ import annotations

import click

from sqla_scheduler.cli._errors import _database_errors, _fail
from sqla_scheduler.cli._params import _Seconds, _Whole


@click.command("demo")
@click.option(
    "--database-url",
    metavar="URL",
    help="Where to run it, e.g. a scratch PostgreSQL or MariaDB database (default: a new "
    "SQLite file in a temporary directory). DATABASE_URL is not read.",
)
@click.option(
    "--duration",
    type=_Seconds(max=86400),
    metavar="SECONDS",
    help="Stop after SECONDS, more than 0 and at most a day (default: run until Ctrl-C).",
)
@click.option(
    "--admin-port",
    type=_Whole(0, 65535),
    metavar="PORT",
    help="Also serve the admin page, actions on, at http://127.0.0.1:PORT/ while it runs "
    "(0: any free port); it prints the address and the password (ADMIN_PASSWORD when set, "
    "else a random one; user ADMIN_USER, default admin). Needs the admin extra.",
)
def demo(database_url: str | None, duration: float | None, admin_port: int | None) -> None:
    """Run a small shop on the scheduler and watch its executions live.

    Orders are placed with a confirmation scheduled in the same transaction (some roll
    back, and their confirmation never runs), carts are swept by cron, shipments polled by
    a task that reschedules itself, and cards charged by a flaky task that retries with
    backoff and, once out of retries, lands in a dead-letter table. Ends with a summary,
    after --duration or on Ctrl-C, and the `history` command that lists the abandoned
    charges.

    So that all this fits in seconds, its scheduler is tuned far from the defaults
    (polling every 200ms, retries after 1s): the first line it prints lists each setting.
    """
    from sqla_scheduler import _demo

    if admin_port is not None:
        try:
            import sqla_scheduler.admin  # noqa: F401  # its message names the extra
        except ImportError as exc:
            _fail(str(exc), 2)
    try:
        with _database_errors(database_url):
            _demo.run(database_url, duration, admin_port=admin_port)
    except _demo.DemoError as exc:
        _fail(f"the demo saw a broken promise: {exc}")
    except _demo.AdminPortError as exc:
        _fail(f"--admin-port {admin_port}: {exc}")
