"""A fresh copy of a template database for each test on MariaDB, wiped and reused after.

Plain module, like ``_pg_databases``. MariaDB has no ``CREATE DATABASE ... TEMPLATE``: a
copy is the template's ``SHOW CREATE`` statements run in a new database (``CREATE TABLE
... LIKE`` would leave out the foreign keys), and the rows of the version table and of the
record of the migration step copied over. A copy whose test left no session in it and its
schema and those two tables as they were is wiped (the tables with a row or a used
``AUTO_INCREMENT`` counter truncated, which resets the counter) and handed to the next
test; any other is dropped.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import pymysql

from tests.support.servers.mariadb import MariaDBServer, quote

__all__ = ["DatabasePool"]

_numbers = itertools.count()  # names unique in this process, whichever pool makes them

VERSION_TABLE = "sqla_scheduler_alembic_version"
#: The record of the migration step: like the version table, copied and compared, never wiped.
RECORD_TABLE = "scheduled_tasks_schema"
_KEPT = (VERSION_TABLE, RECORD_TABLE)

#: What a test may not change without its database being dropped, from the catalogs, one
#: ``(catalog, JSON array)`` row per object, without the database's own name. (Primary and
#: unique keys are indexes; ``table_constraints`` would add nothing, for 4 ms.)
_SCHEMA = """
SELECT 'schema', JSON_ARRAY(default_character_set_name, default_collation_name, schema_comment)
  FROM information_schema.schemata WHERE schema_name = DATABASE()
UNION ALL
SELECT 'table', JSON_ARRAY(table_name, table_type, engine, row_format, table_collation,
                           create_options, table_comment)
  FROM information_schema.tables WHERE table_schema = DATABASE()
UNION ALL
SELECT 'column', JSON_ARRAY(table_name, column_name, ordinal_position, column_default,
                            is_nullable, column_type, collation_name, column_key, extra,
                            column_comment, generation_expression)
  FROM information_schema.columns WHERE table_schema = DATABASE()
UNION ALL
SELECT 'index', JSON_ARRAY(table_name, index_name, non_unique, seq_in_index, column_name,
                           collation, sub_part, index_type, comment, index_comment)
  FROM information_schema.statistics WHERE table_schema = DATABASE()
UNION ALL
SELECT 'foreign key', JSON_ARRAY(table_name, constraint_name, referenced_table_name,
                                 unique_constraint_name, update_rule, delete_rule)
  FROM information_schema.referential_constraints WHERE constraint_schema = DATABASE()
UNION ALL
SELECT 'check', JSON_ARRAY(table_name, constraint_name, check_clause)
  FROM information_schema.check_constraints WHERE constraint_schema = DATABASE()
UNION ALL
SELECT 'key', JSON_ARRAY(table_name, constraint_name, column_name, ordinal_position,
                         referenced_table_schema = table_schema, referenced_table_name,
                         referenced_column_name)
  FROM information_schema.key_column_usage WHERE table_schema = DATABASE()
UNION ALL
SELECT 'view', JSON_ARRAY(table_name, REPLACE(view_definition, CONCAT('`', DATABASE(), '`.'), ''))
  FROM information_schema.views WHERE table_schema = DATABASE()
UNION ALL
SELECT 'trigger', JSON_ARRAY(trigger_name, event_object_table, action_statement)
  FROM information_schema.triggers WHERE trigger_schema = DATABASE()
UNION ALL
SELECT 'routine', JSON_ARRAY(routine_name, routine_type, routine_definition)
  FROM information_schema.routines WHERE routine_schema = DATABASE()
UNION ALL
SELECT 'event', JSON_ARRAY(event_name, event_definition)
  FROM information_schema.events WHERE event_schema = DATABASE()
ORDER BY 1, 2
"""

_SESSIONS = """
SELECT COUNT(*) FROM information_schema.processlist WHERE db = DATABASE() AND id <> CONNECTION_ID()
"""

_COUNTERS = """
SELECT table_name, COALESCE(auto_increment, 1) > 1 FROM information_schema.tables
 WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE'
"""


class DatabasePool:
    """Copies of ``template`` on ``server``, each handed to one test at a time."""

    def __init__(self, server: MariaDBServer, template: str) -> None:
        self.server = server
        self.template = template
        self._free: list[str] = []
        with server.connect(template) as conn, conn.cursor() as cur:
            self._schema = _fetch(cur, _SCHEMA)
            cur.execute("SHOW FULL TABLES")
            tables: list[tuple[str, str]] = sorted(cur.fetchall())
            self._kept = [name for name, kind in tables if name in _KEPT]
            self._kept_rows = _rows(cur, self._kept)
            self._tables = [name for name, kind in tables if kind == "BASE TABLE"]
            self._wiped = [name for name in self._tables if name not in _KEPT]
            self._creates = [_create(cur, "TABLE", name) for name in self._tables]
            # In name order: a view over a view that sorts after it would fail (none yet).
            views = [name for name, kind in tables if kind == "VIEW"]
            prefix = f"{quote(template)}."
            self._creates += [_create(cur, "VIEW", name).replace(prefix, "") for name in views]
            cur.execute(
                "SELECT default_character_set_name, default_collation_name"
                " FROM information_schema.schemata WHERE schema_name = DATABASE()"
            )
            self._charset = cur.fetchone()
        self.created = self.reused = self.dropped = 0

    def take(self) -> str:
        """The name of a database with the template's schema and kept rows, and no other."""
        if self._free:
            self.reused += 1
            return self._free.pop()
        name = f"t{next(_numbers)}"
        charset, collation = self._charset
        with self.server.connect() as conn, conn.cursor() as cur:
            cur.execute(
                f"CREATE DATABASE {quote(name)} CHARACTER SET {charset} COLLATE {collation}"
            )
            cur.execute(f"USE {quote(name)}")
            cur.execute("SET SESSION foreign_key_checks = 0")  # tables in name order
            for statement in self._creates:
                cur.execute(statement)
            for table in map(quote, self._kept):
                cur.execute(f"INSERT INTO {table} SELECT * FROM {quote(self.template)}.{table}")
        self.created += 1
        return name

    def give_back(self, name: str) -> None:
        """Wipe ``name`` for the next test if its test left it reusable; else drop it."""
        try:
            with self.server.connect(name) as conn, conn.cursor() as cur:
                # A session of the test's that holds a lock fails the wipe, not hangs it.
                cur.execute("SET SESSION lock_wait_timeout = 10, foreign_key_checks = 0")
                clean = (
                    _fetch(cur, _SCHEMA) == self._schema
                    and _fetch(cur, _SESSIONS) == [(0,)]
                    and _rows(cur, self._kept) == self._kept_rows
                )
                if clean:
                    self._wipe(cur)
                    self._free.append(name)
        except pymysql.Error:
            clean = False  # e.g. the test dropped it
        if not clean:
            self.server.drop_database(name)
            self.dropped += 1

    def _wipe(self, cur: Any) -> None:
        """Truncate the tables with a row or a used counter (the others cost as much)."""
        if not self._wiped:
            return
        cur.execute(
            "SELECT " + ", ".join(f"EXISTS (SELECT 1 FROM {quote(t)})" for t in self._wiped)
        )
        has_rows = dict(zip(self._wiped, cur.fetchone(), strict=True))
        cur.execute(_COUNTERS)
        used = dict(cur.fetchall())
        for table in self._wiped:
            if has_rows[table] or used.get(table):
                cur.execute(f"TRUNCATE TABLE {quote(table)}")


def _fetch(cur: Any, query: str) -> list[tuple[Any, ...]]:
    cur.execute(query)
    return list(cur.fetchall())


def _rows(cur: Any, tables: list[str]) -> list[list[tuple[Any, ...]]]:
    """Each table's rows, sorted."""
    return [sorted(_fetch(cur, f"SELECT * FROM {quote(table)}"), key=repr) for table in tables]


def _create(cur: Any, kind: str, name: str) -> str:
    """``SHOW CREATE`` of a table or view; a table's counter left at 1."""
    cur.execute(f"SHOW CREATE {kind} {quote(name)}")
    row = cur.fetchone()
    assert row is not None
    return re.sub(r" AUTO_INCREMENT=\d+", "", row[1]) if kind == "TABLE" else str(row[1])
