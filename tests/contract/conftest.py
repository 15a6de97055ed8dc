"""The contract suite: each operation of the dialect seam, called directly, on every database.

``sqla_scheduler._dialects.Backend`` is where the databases differ: its strategies
(``insert_ignoring``, ``upsert``, ``raw_row_json``, ``json_rows``, ``unit_of_work``,
``conflicted``, ``busy``, ``prepared_lost``, ``clock_query``, ...) and the statement
builders of ``sqla_scheduler._statements`` that branch on its capabilities (the pick and
its marking, reading rows back, a task's lock, the scheduling inserts, the JSON of a row,
rows from a list). Each test here runs one of them against a real server, the same way on
each database, and asserts what the scheduler relies on in the rows it leaves behind: so
that a database added to the seam learns in seconds what it gets wrong, before the
scheduler-level suite (the conformance suite, ``db`` in ``tests/conftest.py``) tells it in
minutes and less precisely. Models: River's ``riverdrivertest``, APScheduler's
``test_datastores.py``.

No mocks, no engines of both modes: the seam is sync functions over a ``Connection``
(async callers reach them through ``run_sync``). Each test gets a fresh migrated database
from the suite's pools (``pg_url``, ``mariadb_url``, a copy of ``sqlite_template``).

A test that needs a capability says so, by the capability rather than the database's
name (``@databases(lambda backend: backend.json_rows is not None, "lists bind
otherwise")``), so that a new database that has it is tested at once; the others are
skipped before a database is made for them. Where a test must make a database do
something (a deadlock, a lock wait that times out, ``database is locked``), it looks up
how in a table keyed by the database's name, and fails on a database it has no entry for.

Adding a database:

1. its ``Backend`` in ``sqla_scheduler/_dialects/backends.py``, and its URL scheme in
   ``urls.py``;
2. a throwaway server and a fixture giving a fresh migrated database's URL in
   ``tests/conftest.py`` (as ``pg_url`` and ``mariadb_url`` do), named in ``_URLS`` below,
   and its name in ``DATABASES`` (``_database.py``);
3. its entries in the tables keyed by a database's name: the settings that make a lock
   wait fail (``_database.py``), how its server is made to deadlock, sleep, and the like
   (at the top of the test modules);
4. ``pytest -n 2 tests/contract`` until it passes, then the whole suite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from tests.contract._database import DATABASES, Database
from tests.support import sqlite_file_url

#: The fixture that gives a fresh migrated database's URL, for each database on a server.
_URLS = {"postgresql": "pg_url", "mariadb": "mariadb_url"}


@pytest.fixture(params=DATABASES)
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A fresh, migrated database of each kind; at teardown, no connection may be left
    out of its engine's pool."""
    name: str = request.param
    if name == "sqlite":
        url = sqlite_file_url(request.getfixturevalue("sqlite_template"), tmp_path)
    else:
        url = request.getfixturevalue(_URLS[name])
    db = Database(name, url, create_engine(url))
    try:
        yield db
        assert db.checked_out() == 0, "the test left a connection out of the pool"
    finally:
        db.dispose()
