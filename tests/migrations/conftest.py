"""The migration tests' databases: empty ones of each backend, dropped at teardown."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine

from tests.support import empty_databases


@pytest.fixture(params=["postgresql", "sqlite", "mariadb"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def new_database(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[Callable[[], str]]:
    """Makes empty databases of ``backend`` (dropped at teardown) and returns their URLs."""
    with empty_databases(request, backend, tmp_path) as make:
        yield make


@pytest.fixture
def empty_db(new_database: Callable[[], str]) -> str:
    return new_database()


@pytest.fixture
def engine(empty_db: str) -> Iterator[Engine]:
    eng = create_engine(empty_db)
    try:
        yield eng
    finally:
        eng.dispose()
