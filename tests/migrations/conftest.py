"""The migration tests' databases: empty ones of each backend, dropped at teardown."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine

from tests._mariadb import MariaDBServer
from tests._postgres import PostgresCluster


@pytest.fixture(params=["postgresql", "sqlite", "mariadb"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def new_database(
    request: pytest.FixtureRequest, backend: str, tmp_path: Path
) -> Iterator[Callable[[], str]]:
    """Makes empty databases of ``backend`` (dropped at teardown) and returns their URLs."""
    made: list[str] = []
    server: PostgresCluster | MariaDBServer | None = None
    if backend == "postgresql":
        server = request.getfixturevalue("pg_cluster")
    elif backend == "mariadb":
        server = request.getfixturevalue("mariadb_server")

    def make() -> str:
        name = f"mig_{os.getpid()}_{len(made)}_{id(made)}"
        made.append(name)
        if server is None:
            return f"sqlite:///{tmp_path / name}.db"
        server.create_database(name)
        return server.url(name)

    try:
        yield make
    finally:
        if server is not None:
            for name in made:
                server.drop_database(name)


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
