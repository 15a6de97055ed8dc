"""``sqla-scheduler admin``: it checks its arguments, and says the page is not there yet."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

from sqla_scheduler import cli
from tests._cli import cli_env, one_error_line, run

APP = "tests.cli.app:scheduler"


def test_admin_is_not_available_yet(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    done = run("admin", APP, "--host", "0.0.0.0", "--port", "9000", env=cli_env(DATABASE_URL=url))
    assert done.returncode == 1
    line = one_error_line(done.stderr)
    assert line.startswith("sqla-scheduler: the admin page is not available yet")
    missing = [m for m in ("starlette", "uvicorn", "jinja2") if importlib.util.find_spec(m) is None]
    assert ("install sqla-scheduler[admin]" in line) == bool(missing)


def test_admin_names_the_extra_when_its_packages_are_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'app.db'}")
    monkeypatch.setattr(cli, "_missing_admin_packages", lambda: ["starlette", "uvicorn"])
    result = CliRunner().invoke(cli.cli, ["admin", APP])
    assert result.exit_code == 1
    assert result.stderr == (
        "sqla-scheduler: the admin page is not available yet; it will need starlette, "
        "uvicorn: install sqla-scheduler[admin]\n"
    )
