"""The one seam where the databases differ.

Everything dialect-specific the library does is decided here, and nothing else asks which
database it talks to:

- ``backends``: a ``Backend`` per database, with capabilities named for what they mean
  (whether ``NOTIFY`` exists, how JSON and timestamps are stored, whether lists bind as
  arrays, ...) and, where the SQL itself differs, the operation the statement builders
  call instead of asking (which INSERT skips an existing key, how an upsert is written, a
  list bound as one parameter, the rows of bound keys, a task's turn, a row moved into
  another table, a change read back, a raw row as JSON, NOTIFY, how the scheduler's own
  transactions begin, which errors are a lost conflict worth running again).
  ``backend_for`` finds an engine's, failing on a database the scheduler does not run
  on, or a server too old (no ``SKIP LOCKED``). (``SKIP LOCKED`` needs no flag:
  SQLAlchemy's SQLite compiler leaves ``FOR UPDATE`` out.)
- ``operations``: the SQL of those operations, one function per operation and database.
- ``walks``: how a pick and the next due time walk the due index, by band or by range.
- ``marking``: an UPDATE or a DELETE whose rows the caller reads back, one statement with
  RETURNING or, without it (MariaDB, MySQL), the rows locked, changed and read by key.
- ``urls``: which databases are supported at all, checked on a URL (``check_url``) before
  any driver is imported.
- ``columns``: how each database declares the scheduler's columns and tables (the types
  and table options that differ by database), for the models and the migration steps.
- ``notices``: the channel name wake-ups use and the payloads sent on it.
"""

from sqla_scheduler._dialects.backends import (
    Backend,
    backend_for,
    known_backend,
    listen_url_problem,
    replica_lag,
)
from sqla_scheduler._dialects.marking import Marking
from sqla_scheduler._dialects.notices import (
    MAX_NOTICE_BYTES,
    ResultNotice,
    notice_of_check,
    notice_of_later,
    notice_of_pause,
    notice_of_stop,
    notify_channel,
    read_check_notice,
    read_notice,
    read_pause_notice,
    read_result_notice,
    read_stop_notice,
    result_channel,
    sql_notice_of_later,
    sql_notice_of_result,
)
from sqla_scheduler._dialects.operations import Move
from sqla_scheduler._dialects.urls import (
    UnsupportedDatabaseError,
    borrowed_engine,
    check_url,
    sync_url,
    tool_engine,
)
from sqla_scheduler._dialects.walks import Due

__all__ = [
    "MAX_NOTICE_BYTES",
    "Backend",
    "Due",
    "Marking",
    "Move",
    "ResultNotice",
    "UnsupportedDatabaseError",
    "backend_for",
    "borrowed_engine",
    "check_url",
    "known_backend",
    "listen_url_problem",
    "notice_of_check",
    "notice_of_later",
    "notice_of_pause",
    "notice_of_stop",
    "notify_channel",
    "read_check_notice",
    "read_notice",
    "read_pause_notice",
    "read_result_notice",
    "read_stop_notice",
    "replica_lag",
    "result_channel",
    "sql_notice_of_later",
    "sql_notice_of_result",
    "sync_url",
    "tool_engine",
]
