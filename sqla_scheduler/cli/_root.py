"""The root group, ``cli``: its help, the list of commands (each with the whole first
sentence of its help), a bad value answered in one line, and the ``SQLA_SCHEDULER_``
variables its commands read for their own options.

The commands themselves are added in the package's ``__init__``."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from sqla_scheduler.cli._errors import _fail


class _Group(click.Group):
    """A group of commands that lists each with the whole first sentence of its help (click
    cuts it to fit one line, mid-sentence), and answers a value an option or argument does
    not take in one line that says what it takes."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [
            (name, command.get_short_help_str(limit=sys.maxsize))
            for name in self.list_commands(ctx)
            if (command := self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.MissingParameter:
            raise  # click's usage line is the best answer: it shows what is missing
        except click.BadParameter as exc:
            _fail(_bad_value(exc), 2)


def _bad_value(exc: click.BadParameter) -> str:
    """``COMMAND OPTION: 'VALUE' is not ...``, and the variable the value came from."""
    param, ctx = exc.param, exc.ctx
    message = exc.message.rstrip(".")
    if param is None or ctx is None:
        return message
    names = []
    at: click.Context | None = ctx
    while at is not None and at.parent is not None:  # the root is the program's name
        names.append(at.info_name or "")
        at = at.parent
    if isinstance(param, click.Option):
        flag = next((opt for opt in param.opts if opt.startswith("--")), param.opts[0])
    else:
        flag = param.human_readable_name.strip("[].")
    where = " ".join([*reversed(names), flag])
    source = ctx.get_parameter_source(param.name or "")
    if source is click.core.ParameterSource.ENVIRONMENT:
        envvars = [param.envvar] if isinstance(param.envvar, str) else param.envvar or []
        found = next((name for name in envvars if name in os.environ), None)
        if found is not None:
            message += f" (read from {found})"
    return f"{where}: {message}"


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sqla-scheduler", prog_name="sqla-scheduler")
def cli() -> None:
    """sqla-scheduler: a persistent, cluster-safe task scheduler for SQLAlchemy apps.

    Commands that need a database take --url, or read DATABASE_URL. Exit status: 0 on
    success, 2 for bad usage, 1 when the work fails (one line on stderr says why).
    """


def _command_line_envvars() -> frozenset[str]:
    """The ``SQLA_SCHEDULER_`` variables the commands read for their own options (not
    config keys): a worker skips them rather than call them unknown."""
    from sqla_scheduler.config import SchedulerConfig
    from sqla_scheduler.worker import ENV_PREFIX

    keys = {ENV_PREFIX + field.upper() for field in SchedulerConfig.__dataclass_fields__}
    found: set[str] = set()
    commands: list[click.Command] = [cli]
    while commands:
        command = commands.pop()
        if isinstance(command, click.Group):
            commands.extend(command.commands.values())
        for param in command.params:
            names = [param.envvar] if isinstance(param.envvar, str) else param.envvar or []
            found.update(n for n in names if n.startswith(ENV_PREFIX) and n not in keys)
    return frozenset(found)
