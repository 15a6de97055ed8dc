"""The documentation's examples run, as written, against a fresh SQLite file.

Every fenced block in ``docs/`` is accounted for: a marked block runs (below), a shell
block's commands are checked (further below), and only program output, diagrams and
abridged SQL (``SHOWN_ONLY``) are left alone.

Python examples. A fenced ``python`` block directly preceded by ``<!-- test: GROUP... -->``
(at the same indentation, e.g. inside a tab or a list item) belongs to each named group.
The blocks of one group on one page are joined in page order into a script, which runs in
a directory holding ``app.db``, a SQLite file already migrated (``sqla-scheduler db
upgrade``), with warnings as errors as in the rest of the suite. A script that exits
non-zero fails the test.

Fixtures. What a page's reader already has, and what shows that an example did what the
page says, lives in ``tests/docs_fixtures/PAGE/`` (PAGE: the page's file name without
``.md``), so the page itself shows only what a reader would write:

- the directory is copied into the script's directory first, so a package in it imports
  the way the page's code expects (``myapp/jobs.py`` for ``from myapp.jobs import
  scheduler``);
- ``GROUP.setup.py`` is put before the group's blocks and ``GROUP.check.py`` after them,
  in the same script: the setup completes a fragment (its imports, the engine or the
  session it uses), the check asserts the outcome. They share the script's globals, so
  ruff lets them use names the page defines.

Files. ``<!-- test: GROUP file=PATH -->`` writes the block, in any language, to PATH in the
script's directory instead of into the script: a module the page shows whole
(``myapp/tasks.py``), an ``alembic.ini`` the check hands to Alembic, text the check
compares with what the library does.

Whole example files. ``<!-- shows: PATH -->`` says the block is the repository's file
PATH (``examples/fastapi_app/app.py``), byte for byte: a reader copies a program that
runs, and the file's own tests (``tests/test_example_*.py``) run it.

Shell commands. Each command of an ``sh``/``bash``/``console`` block (``$`` prompts, ``\\``
continuations, ``NAME=value`` prefixes and ``#`` comments understood) must be one this
module knows how to check: ``sqla-scheduler`` (or ``python -m sqla_scheduler``) is parsed
by the real command line, so a renamed option or command fails, and its ``db`` and
``executions`` commands also run, in page order, against a SQLite file standing in for the
page's database URL; commands that run until stopped (``worker``, ``admin``, ``demo``) are
only parsed. ``pip install`` must name the project (or a path to its clone) with extras
it defines, ``git clone`` the project's Source URL, ``make`` a target of
the Makefile, ``alembic`` parse with Alembic's own parser, ``python -m pytest`` collect
what it names. ``uvicorn`` and ``flask ... run`` serve: from the repository's root, on a
free port and a SQLite file standing in for the page's, the server answers a request and
stops cleanly at Ctrl-C. Any other command fails the test until a check is added for it.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

import click
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from sqlalchemy import make_url

from sqla_scheduler import migrate
from sqla_scheduler.cli import cli
from tests.support import cli as _cli
from tests.support.cli import ROOT, cli_env

DOCS = ROOT / "docs"
FIXTURES = ROOT / "tests" / "docs_fixtures"
MARKER = re.compile(r"^(?P<indent>[ \t]*)<!-- (?P<kind>test|shows): (?P<spec>[^>]*?) -->\s*$")
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)\s*$")

#: Blocks shown, never run: program output and formulas, diagrams, SQL abridged from what
#: the statement builders produce (their own tests run the real statements).
SHOWN_ONLY = {"text", "mermaid", "sql"}
#: Blocks of shell commands, checked by ``test_docs_shell_commands``.
SHELL = {"sh", "bash", "console", "shell"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Block:
    """A fenced block of a page, with the groups and file its marker names (if any)."""

    page: str
    line: int
    lang: str
    body: str
    groups: tuple[str, ...] = ()
    file: str | None = None
    #: the repository's file the block is, byte for byte (``<!-- shows: PATH -->``)
    shows: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks(page: Path) -> Iterator[Block]:
    """Every fenced block of ``page``, in page order."""
    lines = page.read_text().splitlines()
    number = 0
    while number < len(lines):
        fence = FENCE.match(lines[number])  # outside a block, any fence opens one
        if fence is None:
            following = lines[number + 1] if number + 1 < len(lines) else ""
            if MARKER.match(lines[number]) and not FENCE.match(following):
                raise AssertionError(f"{page.name}:{number + 1}: marker not before a block")
            number += 1
            continue
        indent = fence["indent"]
        end = lines.index(f"{indent}```", number + 1)
        marker = MARKER.match(lines[number - 1]) if number else None
        groups: list[str] = []
        file = shows = None
        if marker is not None and marker["indent"] != indent:
            raise AssertionError(f"{page.name}:{number}: marker not at its block's indent")
        if marker is not None and marker["kind"] == "shows":
            shows = marker["spec"]
        elif marker is not None:
            for word in marker["spec"].split():
                if word.startswith("file="):
                    file = word.removeprefix("file=")
                else:
                    groups.append(word)
        block = Block(
            page=page.name,
            line=number + 1,
            lang=fence["lang"],
            body=textwrap.dedent("\n".join(lines[number + 1 : end])) + "\n",
            groups=tuple(groups),
            file=file,
            shows=shows,
        )
        if marker is not None and not shows and block.lang != "python" and not file:
            raise AssertionError(f"{block.where}: only a python block runs without file=")
        yield block
        number = end + 1


BLOCKS = [block for page in sorted(DOCS.rglob("*.md")) for block in blocks(page)]


@dataclass(kw_only=True, slots=True)
class Example:
    """One group of one page: its script and the files written beside it."""

    page: str
    group: str
    parts: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)

    @property
    def fixtures(self) -> Path:
        return FIXTURES / self.page.removesuffix(".md")

    def script(self) -> str:
        setup = self.fixtures / f"{self.group}.setup.py"
        check = self.fixtures / f"{self.group}.check.py"
        parts = [
            *([setup.read_text()] if setup.exists() else []),
            *self.parts,
            *([check.read_text()] if check.exists() else []),
        ]
        return "\n\n".join(parts)


def runnable_examples() -> dict[tuple[str, str], Example]:
    """``(page, group)`` -> the group's example."""
    examples: dict[tuple[str, str], Example] = {}
    for block in BLOCKS:
        for group in block.groups:
            example = examples.setdefault(
                (block.page, group), Example(page=block.page, group=group)
            )
            if block.file is None:
                example.parts.append(block.body)
            else:
                example.files[block.file] = example.files.get(block.file, "") + block.body
    return examples


EXAMPLES = runnable_examples()


def test_the_getting_started_examples_are_runnable() -> None:
    assert ("getting-started.md", "sync") in EXAMPLES
    assert ("getting-started.md", "async") in EXAMPLES


def test_every_block_is_run_checked_or_only_shown() -> None:
    unaccounted = [
        f"{block.where} ({block.lang})"
        for block in BLOCKS
        if not block.groups and block.shows is None and block.lang not in SHELL | SHOWN_ONLY
    ]
    assert not unaccounted, f"mark these with <!-- test: GROUP -->: {unaccounted}"


SHOWING = [block for block in BLOCKS if block.shows is not None]


@pytest.mark.parametrize("block", SHOWING, ids=[block.where for block in SHOWING])
def test_a_block_that_shows_a_file_is_that_file(block: Block) -> None:
    """The page's copy has not drifted from the file its tests run."""
    assert block.shows is not None
    assert block.body == (ROOT / block.shows).read_text(), f"{block.where}: not {block.shows}"


def test_every_fixture_belongs_to_a_group() -> None:
    groups = {(page.removesuffix(".md"), group) for page, group in EXAMPLES}
    for path in sorted(FIXTURES.glob("*/*.py")):
        name, dot, role = path.stem.rpartition(".")
        if dot and role in {"setup", "check"}:
            assert (path.parent.name, name) in groups, f"{path}: no such group on the page"


@pytest.fixture(scope="module")
def migrated_app_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once (``sqla-scheduler db upgrade``), for each example to
    copy as its ``app.db``."""
    path = tmp_path_factory.mktemp("migrated") / "app.db"
    migrate.upgrade(f"sqlite:///{path}")
    return path


#: The examples' runner: a Python, warnings as errors, that imports once what nearly every
#: example imports (SQLAlchemy and the scheduler: most of a fresh interpreter's CPU), then
#: forks a child per example, which runs the script as ``python -W error example.py``
#: would (its directory as the working directory and first on the path, ``__main__``, its
#: output to files) and ends as the script does. The runner prints its exit code, or kills
#: it after ``timeout`` seconds.
RUNNER = """
import json, os, runpy, select, signal, sys

import sqlalchemy.ext.asyncio, sqlalchemy.orm
from sqla_scheduler import Scheduler

for line in sys.stdin:  # one example a line: its script, output files and timeout
    request = json.loads(line)
    child = os.fork()
    if child == 0:
        break
    waiting = os.pidfd_open(child)
    if not select.select([waiting], [], [], request["timeout"])[0]:
        os.kill(child, signal.SIGKILL)
    os.close(waiting)
    print(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]), flush=True)
else:
    sys.exit(0)

null = os.open(os.devnull, os.O_RDONLY)
os.dup2(null, 0)
for fd, name in ((1, "stdout"), (2, "stderr")):
    os.dup2(os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
script = request["script"]
os.chdir(os.path.dirname(script))
sys.path[0] = os.path.dirname(script)
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
"""


@dataclass(frozen=True, slots=True)
class ExampleRunner:
    """A running ``RUNNER``, for one test at a time."""

    process: subprocess.Popen[str]

    def run(
        self, script: Path, *, output: Path, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """Run ``script`` as a script of its own, its stdout and stderr written in
        ``output``; its exit code, stdout and stderr."""
        stdout, stderr = output / "stdout", output / "stderr"
        request = {"script": str(script), "stdout": str(stdout), "stderr": str(stderr)}
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps({**request, "timeout": timeout}) + "\n")
        self.process.stdin.flush()
        code = self.process.stdout.readline()
        assert code, f"the examples' runner ended: {self.process.wait()}"
        return subprocess.CompletedProcess(
            [str(script)], int(code), stdout.read_text(), stderr.read_text()
        )


@pytest.fixture(scope="module")
def example_runner() -> Iterator[ExampleRunner]:
    with subprocess.Popen(
        [sys.executable, "-W", "error", "-c", RUNNER],
        env=cli_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdin is not None
        try:
            yield ExampleRunner(process)
        finally:
            process.stdin.close()  # the runner's end
            assert process.wait(timeout=60) == 0


@pytest.mark.parametrize(
    "key", sorted(EXAMPLES), ids=[f"{page}:{group}" for page, group in sorted(EXAMPLES)]
)
def test_docs_example_runs(
    key: tuple[str, str], migrated_app_db: Path, example_runner: ExampleRunner, tmp_path: Path
) -> None:
    example = EXAMPLES[key]
    directory = tmp_path / "example"
    directory.mkdir()
    if example.fixtures.is_dir():
        shutil.copytree(example.fixtures, directory, dirs_exist_ok=True)
    for name, text in example.files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    shutil.copyfile(migrated_app_db, directory / "app.db")
    script = directory / "example.py"
    script.write_text(example.script())
    run = example_runner.run(script, output=tmp_path, timeout=120)
    assert run.returncode == 0, f"{key}:\n{run.stdout}\n{run.stderr}"


# --- shell commands ---------------------------------------------------------------------

#: ``sqla-scheduler`` commands that also run (quickly, then exit) against a SQLite file.
RUN = {"db upgrade", "db current", "db downgrade", "executions"}
SHELL_BLOCKS = [block for block in BLOCKS if block.lang in SHELL]


def commands(block: Block) -> list[tuple[dict[str, str], list[str]]]:
    """The block's commands, each as ``(NAME=value prefixes, argv)``."""
    lines = block.body.replace("\\\n", " ").splitlines()
    if any(line.startswith("$ ") for line in lines):  # a console session: skip the output
        lines = [line.removeprefix("$ ") for line in lines if line.startswith("$ ")]
    found = []
    for line in lines:
        words = shlex.split(line, comments=True)
        env = {}
        while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
            name, _, value = words.pop(0).partition("=")
            env[name] = value
        if words:
            found.append((env, words))
    return found


def leaf_commands(group: click.Group, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    """``("db upgrade", command)`` for every command under ``group``."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield from leaf_commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def parse_cli(args: list[str], env: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """``sqla-scheduler ARGS`` parsed by the real command line, without running it.

    Returns the command (``"db upgrade"``) and its parameters; a usage error raises.
    """
    called: list[tuple[str, dict[str, Any]]] = []

    def record(path: str, **params: Any) -> None:
        called.append((path, params))

    with ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ))
        os.environ.pop("DATABASE_URL", None)
        os.environ.update(env)
        for path, command in leaf_commands(cli):
            stack.enter_context(mock.patch.object(command, "callback", partial(record, path)))
        cli.main(args, prog_name="sqla-scheduler", standalone_mode=False)
    (parsed,) = called
    return parsed


def check_sqla_scheduler(args: list[str], env: dict[str, str], database: str) -> None:
    command, _ = parse_cli(args, env)
    if command not in RUN:
        return
    # the page's database URL (a placeholder, or PostgreSQL) becomes the SQLite file
    args = [database if n and args[n - 1] == "--url" else arg for n, arg in enumerate(args)]
    run = _cli.invoke(*args, env=cli_env(DATABASE_URL=database))
    assert run.returncode == 0, f"sqla-scheduler {shlex.join(args)}:\n{run.stdout}\n{run.stderr}"


def project_extras() -> tuple[str, set[str]]:
    """The project's name and extras, from pyproject.toml (Python 3.10: as installed)."""
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]  # Python 3.11+
    except ModuleNotFoundError:
        installed = importlib.metadata.metadata("sqla-scheduler")
        return installed["Name"], set(installed.get_all("Provides-Extra") or ())
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["name"], set(project["optional-dependencies"])


def check_pip_install(args: list[str]) -> None:
    name, extras = project_extras()
    for arg in args:
        checkout = re.fullmatch(r"(\.{1,2}/?[\w./-]*?)(\[[\w,-]+\])?", arg)
        if checkout is not None:  # a clone of this repository, e.g. ./sqla-scheduler[admin]
            requirement = Requirement(name + (checkout.group(2) or ""))
            assert requirement.extras <= extras, arg
            continue
        requirement = Requirement(arg)
        assert canonicalize_name(requirement.name) == canonicalize_name(name), arg
        assert requirement.extras <= extras, arg


def check_git_clone(args: list[str]) -> None:
    """A clone of the project's own repository, as pyproject.toml's Source names it."""
    source = importlib.metadata.metadata("sqla-scheduler").get_all("Project-URL") or []
    assert args in [[url.partition(", ")[2]] for url in source if url.startswith("Source")], (
        f"git clone {shlex.join(args)}"
    )


def check_make(args: list[str]) -> None:
    """Each target is one of the Makefile's; each ``NAME=value`` a variable it lets the
    command line set (``NAME ?= default``)."""
    makefile = (ROOT / "Makefile").read_text()
    for arg in args:
        name, assigns, _value = arg.partition("=")
        if assigns:
            assert re.search(rf"^{re.escape(name)} \?=", makefile, re.MULTILINE), f"make {arg}"
        else:
            assert re.search(rf"^{re.escape(arg)}:", makefile, re.MULTILINE), f"make {arg}"


def check_alembic(args: list[str], env: dict[str, str]) -> None:
    from alembic.config import CommandLine

    try:
        options = CommandLine(prog="alembic").parser.parse_args(args)
    except SystemExit as exc:  # argparse printed why
        raise AssertionError(f"alembic {shlex.join(args)}: bad usage") from exc
    authoring_env = (ROOT / "alembic" / "env.py").read_text()
    for name in env:
        assert name in authoring_env, f"alembic/env.py does not read {name}"
    if getattr(options, "head", None):
        assert migrate.script_directory().get_revisions(options.head), options.head


def check_bench(script: str, args: list[str]) -> None:
    """A benchmark script that exists and offers every option the command passes (it is
    not run: a benchmark takes minutes and a machine of its own)."""
    assert (ROOT / script).is_file(), script
    shown = subprocess.run(
        [sys.executable, script, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert shown.returncode == 0, f"{script} --help:\n{shown.stderr}"
    for option in (arg for arg in args if arg.startswith("--")):
        assert re.search(rf"{re.escape(option)}\b", shown.stdout), f"{script} has no {option}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serves(argv: list[str]) -> bool:
    """Whether the command serves an application until stopped (``check_serves``)."""
    return argv[0] == "uvicorn" or (argv[0] == "flask" and "run" in argv)


def check_serves(argv: list[str], env: dict[str, str], tmp_path: Path) -> None:
    """``uvicorn``/``flask ... run`` from the repository's root (where ``examples.`` imports)
    on a free port, its ``DATABASE_URL`` a SQLite file of the test's, the driver the page's:
    it answers a request (a 404 will do) and exits 0 at Ctrl-C."""
    if "DATABASE_URL" in env:
        url = make_url(env["DATABASE_URL"])
        assert url.get_backend_name() == "sqlite", f"{shlex.join(argv)}: serve it on SQLite"
        env = {**env, "DATABASE_URL": str(url.set(database=str(tmp_path / "served.db")))}
    port = free_port()
    log_path = tmp_path / "server.log"
    command = [sys.executable, "-m", *argv, "--port", str(port)]
    # the server's Ctrl-C is Python's own even where this process ignores SIGINT (a
    # background job's does): a child inherits an ignored signal
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with log_path.open("wb") as log:
            server = subprocess.Popen(
                command,
                cwd=ROOT,
                env=cli_env(**env),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as answer:
                    status = answer.status
            except urllib.error.HTTPError as error:
                status = error.code
            except OSError:  # not listening yet
                assert server.poll() is None, f"{shlex.join(argv)}:\n{log_path.read_text()}"
                assert time.monotonic() < deadline, f"no answer:\n{log_path.read_text()}"
                time.sleep(0.1)
                continue
            break
        assert status < 500, f"{shlex.join(argv)}: {status}\n{log_path.read_text()}"
        server.send_signal(signal.SIGINT)
        assert server.wait(timeout=30) == 0, f"{shlex.join(argv)}:\n{log_path.read_text()}"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def check_pytest(args: list[str]) -> Callable[[], None]:
    """Start collecting what the command names (in one process: ``-n 0`` overrides a ``-n``
    the command gives); the check that its options parsed and it collected, to call once
    the block's other commands have started theirs (each is seconds of imports)."""
    collect = [
        *(sys.executable, "-m", "pytest", *args),
        *("--collect-only", "-q", "-p", "no:cacheprovider", "-n", "0"),
    ]
    proc = subprocess.Popen(
        collect, cwd=ROOT, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )

    def collected() -> None:
        try:
            out, err = proc.communicate(timeout=120)
        finally:
            proc.kill()
        assert proc.returncode == 0, f"{shlex.join(collect)}:\n{out}\n{err}"

    return collected


@pytest.mark.parametrize(
    "block",
    [
        pytest.param(block, marks=[pytest.mark.slow] if "python -m pytest" in block.body else [])
        for block in SHELL_BLOCKS
    ],
    ids=[block.where for block in SHELL_BLOCKS],
)
def test_docs_shell_commands(block: Block, tmp_path: Path) -> None:
    """Each command of a shell block parses, and the safe ones run. Slow by nature where the
    block runs pytest: each command's collection is a pytest process of its own, seconds
    of imports (they run at once)."""
    database = f"sqlite:///{tmp_path / 'docs.db'}"
    pending: list[Callable[[], None]] = []
    for env, argv in commands(block):
        if argv[0] == "sqla-scheduler":
            check_sqla_scheduler(argv[1:], env, database)
        elif argv[:3] == ["python", "-m", "sqla_scheduler"]:
            check_sqla_scheduler(argv[3:], env, database)
        elif argv[:2] == ["pip", "install"]:
            check_pip_install(argv[2:])
        elif argv[0] == "make":
            check_make(argv[1:])
        elif argv[:2] == ["git", "clone"]:
            check_git_clone(argv[2:])
        elif argv[0] == "alembic":
            check_alembic(argv[1:], env)
        elif argv[:3] == ["python", "-m", "pytest"]:
            pending.append(check_pytest(argv[3:]))
        elif serves(argv):
            check_serves(argv, env, tmp_path)
        elif argv[0] == ".venv/bin/python" and argv[1].startswith("bench/"):
            check_bench(argv[1], argv[2:])
        else:
            raise AssertionError(f"{block.where}: no check for `{shlex.join(argv)}`: add one")
    for collected in pending:
        collected()


# --- the framework pages ----------------------------------------------------------------


def one_line(text: str) -> str:
    """``text`` with its ``\\`` continuations joined and its whitespace collapsed."""
    return " ".join(re.sub(r"\\+\n", " ", text).split())


@pytest.mark.parametrize(
    ("page", "example", "command"),
    [
        ("fastapi.md", "examples/fastapi_app/app.py", "uvicorn examples.fastapi_app.app:app"),
        (
            "flask.md",
            "examples/flask_app/app.py",
            "flask --app examples.flask_app.app:create_application run",
        ),
    ],
)
def test_the_framework_pages_show_a_whole_runnable_example(
    page: str, example: str, command: str
) -> None:
    """Issue 46, item 8: what the page shows runs as it stands. Its first program is the
    example file, whole (not an excerpt using names it never defines); its one shell block
    serves that file (``test_docs_shell_commands`` runs it), as the file's docstring says."""
    on_page = [block for block in BLOCKS if block.page == page]
    assert next(block.shows for block in on_page if block.lang == "python") == example
    (shell,) = [block for block in on_page if block.lang in SHELL]
    assert [shlex.join(argv) for _env, argv in commands(shell)] == [command]
    docstring = (ROOT / example).read_text().split('"""')[1]
    assert one_line(shell.body) in one_line(docstring), f"{example}'s docstring runs it otherwise"
