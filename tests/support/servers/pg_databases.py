"""A fresh, migrated PostgreSQL database for each test, cloned once and wiped after.

Plain module, like ``_postgres``. ``CREATE DATABASE ... TEMPLATE`` copies the template
block by block: about 70 ms of the server's CPU, for each of the suite's 700 PostgreSQL
tests. A database whose test left no session in it and no change in its catalogs is
wiped instead (the tables the test wrote to truncated, their sequences restarted,
statistics reset), about 30 ms with the connections of both sides, and handed to the next
test: about 550 of the 700 in a run are. Anything
else (a test that created, altered or dropped an object, changed a database setting, left
a session, a prepared transaction or a large object, or moved the version table or the
record of the migration step) gets
its database dropped, as every test's was before.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from tests.support.servers.postgres import PostgresCluster

__all__ = ["DatabasePool"]

_numbers = itertools.count()  # names unique in this process, whichever pool makes them

#: What the migrations leave behind and a test may not change without its database being
#: dropped: a row created or updated in any of these shows up with a newer ``xmin``, and
#: a row deleted as a smaller count.
CATALOGS = (
    "pg_namespace", "pg_class", "pg_attribute", "pg_attrdef", "pg_constraint", "pg_index",
    "pg_trigger", "pg_proc", "pg_type", "pg_enum", "pg_depend", "pg_description",
    "pg_sequence", "pg_rewrite", "pg_extension", "pg_policy", "pg_statistic_ext",
    "pg_event_trigger", "pg_publication", "pg_largeobject_metadata",
)  # fmt: skip

VERSION_TABLE = "sqla_scheduler_alembic_version"
#: The record of the migration step: like the version table, compared, never truncated.
RECORD_TABLE = "scheduled_tasks_schema"
_KEPT = [VERSION_TABLE, RECORD_TABLE]

#: The next transaction id, as the 32-bit ``xmin`` of catalog rows shows it.
_NEXT_XID = sql.SQL("SELECT mod(pg_snapshot_xmax(pg_current_snapshot())::text::bigint, 4294967296)")

_STATE = sql.SQL("SELECT {}").format(
    sql.SQL(", ").join(
        sql.SQL("(SELECT count(*) FROM {0}), (SELECT count(*) FROM {0} WHERE {1})").format(
            sql.Identifier(catalog),
            sql.SQL("xmin::text::bigint >= {}").format(sql.Placeholder("since")),
        )
        for catalog in CATALOGS
    )
)

_LEFT_BEHIND = sql.SQL(
    """
    SELECT
        (SELECT count(*) FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid())
      + (SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database())
      + (SELECT count(*) FROM pg_db_role_setting s JOIN pg_database d ON d.oid = s.setdatabase
          WHERE d.datname = current_database())
      + (SELECT count(*) FROM pg_database
          WHERE datname = current_database() AND xmin::text::bigint >= {since})
    """
).format(since=sql.Placeholder("since"))

_TABLES = """
    SELECT schemaname, tablename FROM pg_tables
     WHERE schemaname NOT IN ('pg_catalog', 'information_schema') AND tablename <> ALL(%s)
     ORDER BY 1, 2
"""

#: Each sequence a table owns (serial and identity columns), by the table's name.
_SEQUENCES = """
    SELECT tn.nspname, t.relname, sn.nspname, s.relname
      FROM pg_depend d
      JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
      JOIN pg_namespace sn ON sn.oid = s.relnamespace
      JOIN pg_class t ON t.oid = d.refobjid AND d.refclassid = 'pg_class'::regclass
      JOIN pg_namespace tn ON tn.oid = t.relnamespace
     WHERE d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
"""


class DatabasePool:
    """Clones of ``template`` on ``cluster``, each handed to one test at a time."""

    def __init__(self, cluster: PostgresCluster, template: str) -> None:
        self.cluster = cluster
        self.template = template
        self._free: list[tuple[str, int]] = []  # (name, the xid its catalogs are clean as of)
        with cluster.connect(template) as conn:
            counts = _fetch(conn, _STATE, since=2**32)
            self._catalog_counts = counts[0::2]
            self._version = _versions(conn)
            self._tables: list[tuple[str, str]] = [
                (schema, table) for schema, table in conn.execute(_TABLES, (_KEPT,))
            ]
            owned: dict[tuple[str, str], list[tuple[str, str]]] = {}
            for table_schema, table, schema, sequence in conn.execute(_SEQUENCES):
                owned.setdefault((table_schema, table), []).append((schema, sequence))
        # One flag per table: it has a row, or one of its sequences has been used.
        self._used = sql.SQL("SELECT {}").format(
            sql.SQL(", ").join(
                sql.SQL(" OR ").join(
                    [
                        sql.SQL("EXISTS (SELECT FROM {})").format(sql.Identifier(*table)),
                        *(
                            sql.SQL(
                                "(SELECT last_value IS NOT NULL FROM pg_sequences"
                                " WHERE schemaname = {} AND sequencename = {})"
                            ).format(sql.Literal(schema), sql.Literal(sequence))
                            for schema, sequence in owned.get(table, [])
                        ),
                    ]
                )
                for table in self._tables
            )
        )
        self.created = self.reused = self.dropped = 0

    def take(self) -> tuple[str, int]:
        """A clean database's name, and the transaction id its catalogs are clean as of."""
        if self._free:
            self.reused += 1
            return self._free.pop()
        name = f"t{next(_numbers)}"
        self.cluster.create_database(name, template=self.template)
        self.created += 1
        with self.cluster.connect() as conn:
            return name, _fetch(conn, _NEXT_XID)[0]

    def give_back(self, name: str, since: int) -> None:
        """Wipe ``name`` for the next test if its test left it reusable; else drop it."""
        try:
            with self.cluster.connect(name) as conn:
                clean = self._unchanged(conn, since)
                if clean:
                    self._wipe(conn)
                    self._free.append((name, _fetch(conn, _NEXT_XID)[0]))
        except psycopg.Error:
            clean = False  # e.g. the test dropped or renamed it
        if not clean:
            self.cluster.drop_database(name)
            self.dropped += 1

    @contextmanager
    def lent(self, release: Callable[[str], None] | None = None) -> Iterator[str]:
        """A clean database's name, for the ``with`` block alone; ``release`` ends what
        else holds sessions in it (a bouncer's, a replica's) before it is given back."""
        name, since = self.take()
        try:
            yield name
        finally:
            if release is not None:
                release(name)
            self.give_back(name, since)

    def _unchanged(self, conn: psycopg.Connection[Any], since: int) -> bool:
        state = _fetch(conn, _STATE, since=since)
        return (
            state[0::2] == self._catalog_counts
            and not any(state[1::2])
            and _fetch(conn, _LEFT_BEHIND, since=since) == [0]
            and _versions(conn) == self._version
            and [tuple(row) for row in conn.execute(_TABLES, (_KEPT,))] == self._tables
        )

    def _wipe(self, conn: psycopg.Connection[Any]) -> None:
        """Truncate the tables a test wrote to (truncating an empty one costs as much)."""
        flags = conn.execute(self._used).fetchone() or ()
        written = [table for table, used in zip(self._tables, flags, strict=True) if used]
        if written:
            tables = sql.SQL(", ").join(sql.Identifier(*table) for table in written)
            with conn.transaction():
                conn.execute(sql.SQL("TRUNCATE {} RESTART IDENTITY CASCADE").format(tables))
        conn.execute("SELECT pg_stat_reset()")


def _fetch(conn: psycopg.Connection[Any], query: sql.Composable, **params: int) -> list[int]:
    row = conn.execute(query, params).fetchone()
    assert row is not None
    return [int(value) for value in row]


def _versions(conn: psycopg.Connection[Any]) -> list[str]:
    """The revisions in the version table, then the steps in the record."""
    versions = sql.SQL("SELECT version_num FROM {} ORDER BY 1").format(
        sql.Identifier(VERSION_TABLE)
    )
    steps = sql.SQL("SELECT step::text FROM {} ORDER BY 1").format(sql.Identifier(RECORD_TABLE))
    return [row[0] for query in (versions, steps) for row in conn.execute(query)]
