"""The scheduler's steps in an application's own Alembic history.

``sqla-scheduler alembic revision`` writes, on the application's single head, a revision
whose ``upgrade()`` calls ``sqla_scheduler.alembic.upgrade(op, version=N, start=P)`` and
whose ``downgrade()`` calls ``sqla_scheduler.alembic.downgrade(op, version=P, start=N)``.

Which step the history already brings the tables to (P) is read from the revision files'
source, without a database: walking the revisions from the head down to the base, the
first one whose ``upgrade()`` calls ``sqla_scheduler.alembic.upgrade`` or ``downgrade``
for the same ``table_name`` and ``schema`` gives it, as the ``version=`` of its last such
call; none found, step 0 (no tables). The call is recognised as the command writes it
(``sqla_scheduler.alembic.upgrade(...)``) and through the usual imports
(``import sqla_scheduler.alembic as x``, ``from sqla_scheduler import alembic``, ``from
sqla_scheduler.alembic import upgrade``). Its ``version``, ``table_name`` and ``schema``
must be written as literals: a call whose arguments are expressions, or an ``upgrade``
without ``version=`` (whose step moves with the installed package), is refused, naming
the file and line, since no step can be read from it.
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqla_scheduler.models import DEFAULT_TABLE_NAME

if TYPE_CHECKING:
    from alembic.script import ScriptDirectory

__all__ = ["HistoryError", "Written", "history_step", "revision_text", "write_revision"]

_MODULE = "sqla_scheduler.alembic"
_FUNCTIONS = ("upgrade", "downgrade")


class HistoryError(Exception):
    """The application's Alembic project cannot take the scheduler's revision; ``usage``
    when the command was given something that is not there (a config file, a step)."""

    def __init__(self, message: str, *, usage: bool = False) -> None:
        super().__init__(message)
        self.usage = usage


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """The step the application's history brings the tables to, and which file says so
    (``None``: no revision calls the steps for these tables, step 0)."""

    step: int
    path: Path | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Written:
    """What [`write_revision`][] did: the revision file written (``None`` when the history
    was already at ``version``), from which step to which."""

    path: Path | None
    start: int
    version: int
    found_in: Path | None


def revision_text(
    *, start: int, version: int, table_name: str = DEFAULT_TABLE_NAME, schema: str | None = None
) -> dict[str, str]:
    """The ``imports``, ``upgrades`` and ``downgrades`` a ``script.py.mako`` renders."""
    names = ""
    if table_name != DEFAULT_TABLE_NAME:
        names += f", table_name={table_name!r}"
    if schema is not None:
        names += f", schema={schema!r}"
    return {
        "imports": f"import {_MODULE}",
        "upgrades": f"{_MODULE}.upgrade(op, version={version}, start={start}{names})",
        "downgrades": f"{_MODULE}.downgrade(op, version={start}, start={version}{names})",
    }


def write_revision(
    config_file: str | Path,
    *,
    version: int,
    message: str | None = None,
    table_name: str = DEFAULT_TABLE_NAME,
    schema: str | None = None,
) -> Written:
    """Write a revision on the single head of the Alembic project of ``config_file`` that
    brings the scheduler's tables from the step its history is at to ``version``; write
    nothing when the history is at ``version`` already.

    Raises [`HistoryError`][] when there is no such file or project, the history has
    several heads, a call to the steps in it cannot be read, or it is past ``version``.
    """
    from alembic.util import CommandError, rev_id

    script = _script_directory(config_file)
    try:
        heads = script.get_heads()
        if len(heads) > 1:
            raise HistoryError(
                f"the history of {config_file} has {len(heads)} heads ({', '.join(heads)}): "
                "merge them first: alembic merge heads"
            )
        head = heads[0] if heads else None
        found = history_step(script, head, table_name=table_name, schema=schema)
        if found.step == version:
            return Written(path=None, start=found.step, version=version, found_in=found.path)
        if found.step > version:
            raise HistoryError(
                f"{found.path} brings {_shown(table_name, schema)} to step {found.step}, "
                f"past step {version}: the command writes upgrades only"
            )
        text = revision_text(
            start=found.step, version=version, table_name=table_name, schema=schema
        )
        made = script.generate_revision(
            rev_id(),
            message if message is not None else f"sqla-scheduler: step {found.step} to {version}",
            head=head,
            imports=text["imports"],
            upgrades=text["upgrades"],
            downgrades=text["downgrades"],
        )
    except CommandError as exc:
        raise HistoryError(f"{config_file}: {exc}") from None
    assert made is not None  # generate_revision returns None only for a file it cannot read
    return Written(path=Path(made.path), start=found.step, version=version, found_in=found.path)


def _script_directory(config_file: str | Path) -> ScriptDirectory:
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    if not Path(config_file).is_file():
        raise HistoryError(
            f"-c {config_file}: no such file (run the command where the application's "
            "alembic.ini is, or give its path with -c)",
            usage=True,
        )
    try:
        # quiet: the command says what it wrote, not Alembic's "Generating ..."
        config = Config(str(config_file), cmd_opts=argparse.Namespace(quiet=True))
        return ScriptDirectory.from_config(config)
    except CommandError as exc:
        raise HistoryError(f"{config_file}: {exc}") from None


def history_step(
    script: ScriptDirectory,
    head: str | None,
    *,
    table_name: str = DEFAULT_TABLE_NAME,
    schema: str | None = None,
) -> Found:
    """The step the revisions of ``script`` (an Alembic ``ScriptDirectory``) from ``head``
    down bring the tables named ``table_name`` in ``schema`` to (the module's docstring
    says how it is read)."""
    if head is None:
        return Found(step=0, path=None)
    for revision in script.walk_revisions("base", head):
        path = Path(revision.path)
        if path.suffix != ".py":
            continue  # a sourceless revision: no source to read
        step = _step_in(path, table_name, schema)
        if step is not None:
            return Found(step=step, path=path)
    return Found(step=0, path=None)


def _step_in(path: Path, table_name: str, schema: str | None) -> int | None:
    """The ``version=`` of the last call to the steps for these tables in the ``upgrade()``
    of the revision file at ``path``, or ``None`` when it makes none."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (OSError, SyntaxError, ValueError) as exc:
        raise HistoryError(f"cannot read {path}: {exc}") from None
    upgrade = next(
        (
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "upgrade"
        ),
        None,
    )
    if upgrade is None:
        return None
    modules, functions = _imported_names(tree)
    calls = sorted(
        (node for node in ast.walk(upgrade) if isinstance(node, ast.Call)),
        key=lambda node: (node.lineno, node.col_offset),
    )
    step = None
    for call in calls:
        function = _called(call.func, modules, functions)
        if function is None:
            continue
        where = f"{path}, line {call.lineno}"
        arguments = {k.arg: k.value for k in call.keywords if k.arg is not None}
        if len(call.args) > 1:
            arguments.setdefault("version", call.args[1])
        if "version" not in arguments:
            raise HistoryError(
                f"{where}: sqla_scheduler.alembic.{function} without version=: the step it "
                "brings the tables to moves with the installed package; give version=N"
            )
        values = {name: _literal(node, name, where) for name, node in arguments.items()}
        if (values.get("table_name", DEFAULT_TABLE_NAME), values.get("schema")) != (
            table_name,
            schema,
        ):
            continue
        version = values["version"]
        if not isinstance(version, int) or isinstance(version, bool):
            raise HistoryError(f"{where}: version={version!r} is not a step number")
        step = version
    return step


def _literal(node: ast.expr, name: str, where: str) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise HistoryError(
            f"{where}: the {name}= of a call to sqla_scheduler.alembic is not a literal, "
            "so the step it brings the tables to cannot be read: write it as one"
        ) from None


def _imported_names(tree: ast.Module) -> tuple[set[str], dict[str, str]]:
    """The names that the module's imports bind to ``sqla_scheduler.alembic`` (as dotted
    text) and to its ``upgrade`` and ``downgrade`` (name to function)."""
    modules = {_MODULE}
    functions: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name == _MODULE and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            for alias in node.names:
                if node.module == "sqla_scheduler" and alias.name == "alembic":
                    modules.add(alias.asname or alias.name)
                elif node.module == _MODULE and alias.name in _FUNCTIONS:
                    functions[alias.asname or alias.name] = alias.name
    return modules, functions


def _called(func: ast.expr, modules: set[str], functions: dict[str, str]) -> str | None:
    """``upgrade`` or ``downgrade`` when ``func`` names one of the steps' functions."""
    if isinstance(func, ast.Name):
        return functions.get(func.id)
    if (
        isinstance(func, ast.Attribute)
        and func.attr in _FUNCTIONS
        and _dotted(func.value) in modules
    ):
        return func.attr
    return None


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner is not None else None
    return None


def _shown(table_name: str, schema: str | None) -> str:
    return f"{schema}.{table_name}" if schema is not None else table_name
