"""The ``sqla-scheduler`` command: a thin layer over public functions.

Exit status, for every command: 0 on success, 2 for bad usage (an unknown option, a bad
MODULE:ATTR or database URL), 1 when the work itself fails (an unreachable database, a
missing table, an application that raises on import). Failures print one line on stderr,
``sqla-scheduler: <what went wrong>``, never a traceback.

One module per command group: ``_db``, ``_alembic``, ``_health``, ``_executions``,
``_history`` (history and requeue), ``_results``, ``_control`` (pause, resume, run-now and
cancel), ``_nodes``, ``_worker``, ``_admin`` and ``_demo``. What they share: ``_root``
(the group ``cli`` itself), ``_params`` (parameter types and common options), ``_errors``
(one line on stderr and the exit status), ``_app`` (the application's Scheduler and
database) and ``_tables`` (how listings print). Each command imports what it runs only when it runs.
"""

from __future__ import annotations

from sqla_scheduler.cli._admin import admin
from sqla_scheduler.cli._alembic import alembic_group
from sqla_scheduler.cli._control import cancel, pause, resume, run_now
from sqla_scheduler.cli._db import db
from sqla_scheduler.cli._demo import demo
from sqla_scheduler.cli._executions import executions
from sqla_scheduler.cli._health import health
from sqla_scheduler.cli._history import history, requeue
from sqla_scheduler.cli._nodes import nodes
from sqla_scheduler.cli._results import result
from sqla_scheduler.cli._root import cli
from sqla_scheduler.cli._worker import worker

__all__ = ["cli", "main"]

cli.add_command(db)
cli.add_command(alembic_group)
cli.add_command(health)
cli.add_command(executions)
cli.add_command(history)
cli.add_command(requeue)
cli.add_command(result)
cli.add_command(pause)
cli.add_command(resume)
cli.add_command(run_now)
cli.add_command(cancel)
cli.add_command(nodes)
cli.add_command(worker)
cli.add_command(admin)
cli.add_command(demo)


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="sqla-scheduler")
