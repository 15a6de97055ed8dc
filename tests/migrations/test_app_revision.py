"""``sqla-scheduler alembic revision``: what it writes in an application's Alembic project,
and what it refuses, run in the test process on projects written by hand (no database:
the command reads the revision files, not the database). The end-to-end runs, with
``alembic`` on real databases, are in ``test_app_history.py``."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

import alembic
from sqla_scheduler._app_history import HistoryError, history_step
from tests.support.cli import invoke, one_error_line

MAKO = Path(alembic.__file__).parent / "templates" / "generic" / "script.py.mako"


class Project:
    """An Alembic project with no ``env.py`` (writing a revision does not run it)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ini = root / "alembic.ini"
        self.versions = root / "migrations" / "versions"
        self.versions.mkdir(parents=True)
        shutil.copyfile(MAKO, root / "migrations" / "script.py.mako")
        self.ini.write_text(
            "[alembic]\nscript_location = %(here)s/migrations\npath_separator = os\n"
        )

    def add(self, revision: str, down: str | None, upgrade: str = "pass", head: str = "") -> Path:
        """A revision file whose ``upgrade()`` runs ``upgrade``, after ``head`` lines."""
        path = self.versions / f"{revision}_hand.py"
        body = textwrap.indent(textwrap.dedent(upgrade).strip(), "    ")
        path.write_text(
            f"{textwrap.dedent(head).strip()}\nfrom alembic import op\n"
            f"revision = {revision!r}\ndown_revision = {down!r}\n"
            "branch_labels = None\ndepends_on = None\n\n"
            f"def upgrade():\n{body}\n\n"
            "def downgrade():\n    pass\n"
        )
        return path

    def revision(self, *args: str) -> tuple[int, str, str]:
        done = invoke("alembic", "revision", "-c", str(self.ini), *args)
        return done.returncode, done.stdout, done.stderr

    def files(self) -> set[Path]:
        return set(self.versions.glob("*.py"))

    def step(self, table_name: str = "scheduled_tasks", schema: str | None = None) -> int:
        from alembic.config import Config
        from alembic.script import ScriptDirectory

        script = ScriptDirectory.from_config(Config(str(self.ini)))
        return history_step(
            script, script.get_current_head(), table_name=table_name, schema=schema
        ).step


@pytest.fixture
def project(tmp_path: Path) -> Project:
    made = Project(tmp_path)
    made.add("a1", None, "op.create_table('orders')")
    return made


def written(stdout: str) -> Path:
    assert stdout.startswith("wrote "), stdout
    return Path(stdout.removeprefix("wrote ").split(": ")[0])


def test_each_revision_brings_the_steps_the_history_has_not(project: Project) -> None:
    status, out, err = project.revision("--version", "10")
    assert status == 0, err
    first = written(out)
    assert out == f"wrote {first}: scheduled_tasks from step 0 to 10\n"
    text = first.read_text()
    assert '"""sqla-scheduler: step 0 to 10\n' in text
    assert "\nimport sqla_scheduler.alembic\n" in text
    assert "down_revision: Union[str, Sequence[str], None] = 'a1'" in text
    assert "    sqla_scheduler.alembic.upgrade(op, version=10, start=0)\n" in text
    assert "    sqla_scheduler.alembic.downgrade(op, version=0, start=10)\n" in text
    assert project.step() == 10

    # a later step: only it, on the new head
    status, out, err = project.revision("--version", "11", "-m", "the scheduler's step 11")
    assert status == 0, err
    second = written(out)
    text = second.read_text()
    assert f"down_revision: Union[str, Sequence[str], None] = {first.name.split('_')[0]!r}" in text
    assert '"""the scheduler\'s step 11\n' in text
    assert "    sqla_scheduler.alembic.upgrade(op, version=11, start=10)\n" in text
    assert "    sqla_scheduler.alembic.downgrade(op, version=10, start=11)\n" in text

    before = project.files()
    status, out, err = project.revision("--version", "11")
    assert (status, err) == (0, "")
    assert out == f"nothing to write: {second} brings scheduled_tasks to step 11 already\n"
    assert project.files() == before


def test_other_names_are_other_tables(project: Project) -> None:
    assert project.revision("--version", "11")[0] == 0
    status, out, err = project.revision(
        "--version", "11", "--table-name", "jobs", "--schema", "queue"
    )
    assert status == 0, err
    assert out.endswith(": queue.jobs from step 0 to 11\n")
    text = written(out).read_text()
    assert (
        "sqla_scheduler.alembic.upgrade(op, version=11, start=0, table_name='jobs', schema='queue')"
    ) in text
    assert (
        "sqla_scheduler.alembic.downgrade(op, version=0, start=11, table_name='jobs', "
        "schema='queue')"
    ) in text
    assert (project.step(), project.step("jobs", "queue"), project.step("jobs")) == (11, 11, 0)


def test_the_default_is_the_packages_newest_step(project: Project) -> None:
    from sqla_scheduler.alembic import LATEST

    status, out, err = project.revision()
    assert status == 0, err
    assert out.endswith(f": scheduled_tasks from step 0 to {LATEST}\n")
    assert f"upgrade(op, version={LATEST}, start=0)" in written(out).read_text()


@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        ("--table-name", "jobs;drop", "is not an identifier"),
        ("--table-name", "j" * 56, "is longer than 55 characters"),
        ("--schema", "1queue", "is not an identifier"),
    ],
)
def test_a_name_the_steps_cannot_take_is_bad_usage(
    project: Project, option: str, value: str, problem: str
) -> None:
    status, out, err = project.revision(option, value)
    assert (status, out) == (2, "")
    assert f"sqla-scheduler: alembic revision {option}: {value!r} {problem}" in err
    assert len(project.files()) == 1


def test_an_empty_history_gets_its_first_revision(tmp_path: Path) -> None:
    project = Project(tmp_path)
    status, out, err = project.revision("--version", "3")
    assert status == 0, err
    assert "down_revision: Union[str, Sequence[str], None] = None" in written(out).read_text()


def test_several_heads_are_refused(project: Project) -> None:
    project.add("b2", None)
    before = project.files()
    status, out, err = project.revision("--version", "11")
    assert (status, out) == (1, "")
    line = one_error_line(err)
    assert line.startswith(f"sqla-scheduler: the history of {project.ini} has 2 heads (")
    assert line.endswith("): merge them first: alembic merge heads")
    assert project.files() == before


def test_a_missing_config_is_bad_usage(tmp_path: Path) -> None:
    done = invoke("alembic", "revision", "-c", str(tmp_path / "nope.ini"), "--version", "1")
    assert done.returncode == 2
    assert one_error_line(done.stderr) == (
        f"sqla-scheduler: -c {tmp_path / 'nope.ini'}: no such file (run the command where the "
        "application's alembic.ini is, or give its path with -c)"
    )


def test_a_config_without_a_project_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "alembic.ini").write_text("[alembic]\n")
    done = invoke("alembic", "revision", "-c", str(tmp_path / "alembic.ini"), "--version", "1")
    assert done.returncode == 1
    assert one_error_line(done.stderr).startswith(
        f"sqla-scheduler: {tmp_path / 'alembic.ini'}: No 'script_location' key"
    )


def test_a_version_past_the_packages_newest_step_is_bad_usage(project: Project) -> None:
    from sqla_scheduler.alembic import LATEST

    status, out, err = project.revision("--version", str(LATEST + 1))
    assert (status, out) == (2, "")
    assert one_error_line(err) == (
        f"sqla-scheduler: --version {LATEST + 1}: this package's newest step is {LATEST}"
    )
    assert project.revision("--version", "0")[0] == 2  # click's range


def test_a_history_past_the_version_is_refused(project: Project) -> None:
    assert project.revision("--version", "11")[0] == 0
    status, out, err = project.revision("--version", "10")
    assert (status, out) == (1, "")
    assert one_error_line(err).endswith(
        "brings scheduled_tasks to step 11, past step 10: the command writes upgrades only"
    )


def test_the_step_is_read_through_the_usual_imports(project: Project) -> None:
    project.add(
        "b2",
        "a1",
        "sa_alembic.upgrade(op, 5)",
        head="from sqla_scheduler import alembic as sa_alembic",
    )
    assert project.step() == 5
    project.add(
        "c3",
        "b2",
        "up(op, version=7, table_name='jobs')\nup(op, version=6)",
        head="from sqla_scheduler.alembic import upgrade as up",
    )
    assert (project.step(), project.step("jobs")) == (6, 7)
    project.add(
        "d4",
        "c3",
        "x.upgrade(op, version=8)\nx.downgrade(op, version=3)",
        head="import sqla_scheduler.alembic as x",
    )
    assert project.step() == 3  # the last call of upgrade() says where it leaves them
    project.add("e5", "d4", "other.upgrade(op, version=9)", head="import json as other")
    assert project.step() == 3  # no call of the steps: look further down


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        ("sqla_scheduler.alembic.upgrade(op, version=N)", "the version= of a call"),
        ("sqla_scheduler.alembic.upgrade(op, version=1, table_name=T)", "the table_name= of"),
        ("sqla_scheduler.alembic.upgrade(op)", "sqla_scheduler.alembic.upgrade without version="),
        ("sqla_scheduler.alembic.upgrade(op, version='2')", "version='2' is not a step number"),
    ],
)
def test_a_step_that_cannot_be_read_is_refused_naming_the_line(
    project: Project, call: str, problem: str
) -> None:
    path = project.add("b2", "a1", f"op.execute('select 1')\n{call}")
    with pytest.raises(HistoryError) as raised:
        project.step()
    assert str(raised.value).startswith(f"{path}, line 10: ")
    assert problem in str(raised.value)
    status, _out, err = project.revision("--version", "11")
    assert status == 1
    assert one_error_line(err).startswith(f"sqla-scheduler: {path}, line 10: ")
