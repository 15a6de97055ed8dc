"""The dialect seam: a ``Backend`` per database, found by dialect or URL, and nothing
outside ``sqla_scheduler._dialects`` that asks which database it talks to."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from sqlalchemy import make_url
from sqlalchemy.dialects import mssql, mysql, postgresql, sqlite

import sqla_scheduler
from sqla_scheduler._dialects import known_backend
from sqla_scheduler._dialects.backends import MARIADB, POSTGRESQL, SQLITE

_PACKAGE = Path(sqla_scheduler.__file__).parent
_NAMES = {"postgresql", "sqlite", "mysql", "mariadb", "mssql", "oracle"}


def test_a_dialect_or_a_url_finds_its_backend_and_another_database_none() -> None:
    assert known_backend(postgresql.dialect()) is POSTGRESQL  # type: ignore[no-untyped-call]
    assert known_backend(sqlite.dialect()) is SQLITE
    assert known_backend(make_url("postgresql+psycopg://u@h/db")) is POSTGRESQL
    assert known_backend(make_url("sqlite:///app.db")) is SQLITE
    assert known_backend(mysql.dialect()) is MARIADB
    assert known_backend(make_url("mysql+pymysql://u@h/db")) is MARIADB
    assert known_backend(make_url("mariadb+asyncmy://u@h/db")) is MARIADB
    assert known_backend(mssql.dialect()) is None  # type: ignore[no-untyped-call]
    assert known_backend(make_url("oracle://u@h/db")) is None


@pytest.mark.parametrize(
    ("url", "file"),
    [
        ("sqlite:///app.db", "app.db"),
        ("sqlite://", None),
        ("sqlite:///:memory:", None),
        ("sqlite:///file:app.db?mode=ro&uri=true", None),
        ("postgresql+psycopg://u@h/db", None),
    ],
)
def test_only_a_file_connecting_would_create_is_one_to_check(url: str, file: str | None) -> None:
    parsed = make_url(url)
    backend = known_backend(parsed)
    assert backend is not None
    assert backend.missing_database_file(parsed) == file


def test_nothing_outside_the_seam_names_a_database() -> None:
    """Neither a comparison with a dialect's name nor a type or a compiler chosen by one
    (``with_variant``, ``@compiles``): each is in ``sqla_scheduler._dialects``."""
    names = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        if "_dialects" in path.relative_to(_PACKAGE).parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in _NAMES:
                names.append(f"{path.relative_to(_PACKAGE)}:{node.lineno}: {node.value!r}")
    assert names == []


def test_only_the_seam_imports_a_database_s_types_and_only_the_notifier_its_driver() -> None:
    """A dialect's types (``sqlalchemy.dialects``) are imported in ``sqla_scheduler._dialects``
    alone, and the LISTEN connection's driver (psycopg) in ``_notifier`` alone."""
    imports = []
    for path in sorted(_PACKAGE.rglob("*.py")):
        where = path.relative_to(_PACKAGE)
        if "_dialects" in where.parts[:1]:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            elif isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            else:
                continue
            for module in modules:
                driver = module.split(".")[0] == "psycopg" and where != Path("_notifier.py")
                if module.startswith("sqlalchemy.dialects") or driver:
                    imports.append(f"{where}:{node.lineno}: {module}")
    assert imports == []
