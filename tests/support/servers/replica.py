"""A throwaway PostgreSQL streaming replica of a ``_postgres`` cluster.

Plain module (no pytest dependency), like the servers' own::

    with PostgresCluster() as pg, PostgresReplica(pg) as replica:
        pg.create_database("t1")
        replica.wait_caught_up()
        engine = sqlalchemy.create_engine(replica.url("t1"))  # read-only

:meth:`PostgresReplica.start` copies the running primary with ``pg_basebackup`` into a
temporary directory of its own and starts it there, on a free port, as a hot standby that
streams from the primary through a physical replication slot. Being a physical copy, it
has every database of the primary, and those created later once it has replayed them.

It is a :class:`PostgresCluster` in all but how its data directory is made, so it is
stopped, hooked (``live``) and reaped (``cleanup_stale_clusters``) as the
clusters are; :meth:`PostgresReplica.stop` also drops its slot on the primary, which
would keep the primary's WAL for it forever otherwise.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import ClassVar, Final

import psycopg

from tests.support.servers.base import tail
from tests.support.servers.postgres import DIR_PREFIX, PostgresCluster, PostgresClusterError

__all__ = ["DIR_PREFIX", "PostgresReplica", "PostgresReplicaError"]

_START_TIMEOUT: Final = 60.0
_SLOT_DROP_TIMEOUT: Final = 10.0
_RELEASE_TIMEOUT: Final = 10.0
_POLL_INTERVAL: Final = 0.01


class PostgresReplicaError(PostgresClusterError):
    """Starting the replica, or waiting for it, failed."""


class PostgresReplica(PostgresCluster):
    """A hot standby of ``primary`` in a temporary directory.

    :param primary: the running cluster to copy and stream from.
    :param settings: extra server settings; the primary's own apply first, since a
        standby refuses to start with less of some (``max_connections``) than its primary.
    :param base_dir: where to create the temporary directory; default the system temp
        dir. As root it must be traversable by the ``postgres`` user.
    """

    # Under the clusters' prefix, so that cleanup_stale_clusters() reaps replicas too.
    dir_prefix: ClassVar[str] = f"{DIR_PREFIX}replica-"

    def __init__(
        self,
        primary: PostgresCluster,
        settings: Mapping[str, object] | None = None,
        *,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(
            {**primary.settings, **(settings or {})},
            durable=primary.durable,
            bin_dir=primary.bin_dir,
            base_dir=base_dir,
        )
        self.primary = primary
        self._slot: str | None = None

    @property
    def slot_name(self) -> str:
        """The primary's physical replication slot this replica streams through."""
        return re.sub(r"[^a-z0-9_]", "_", self.cluster_name.lower())

    def start(self) -> PostgresReplica:
        """Copy the primary into a new temp dir and start it as a hot standby. Returns self.

        Returns once it accepts connections in recovery; :meth:`wait_caught_up` waits for
        what the primary committed since the copy.
        """
        super().start()
        try:
            self._wait_in_recovery()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server, delete the temp dir and drop the slot on the primary. Idempotent."""
        try:
            super().stop()
        finally:
            self._drop_slot()

    def _make_data_dir(self) -> None:
        """``pg_basebackup`` of the primary, with the settings to stream from it (``-R``)."""
        self._check_primary()
        self._slot = self.slot_name  # from here on, stop() drops it
        self._run(
            [
                str(self.bin_dir / "pg_basebackup"),
                *("-h", self.primary.host, "-p", str(self.primary.port), "-U", self.user),
                *("-D", str(self.data_dir)),
                "--write-recovery-conf",
                "--wal-method=stream",
                # A slot, so that the primary keeps the WAL between the copy and streaming.
                *("--create-slot", f"--slot={self._slot}"),
                "--checkpoint=fast",  # a spread one takes minutes
                "--no-sync",
                "--no-password",
            ]
        )

    def _check_primary(self) -> None:
        """Fail with a clear message when the primary's settings allow no replica.

        The defaults since PostgreSQL 10 do: ``wal_level=replica``, ten WAL senders and
        ten slots. So does the pg_hba.conf initdb writes, for replication connections from
        127.0.0.1; were it changed, pg_basebackup would say which line is missing.
        """
        with self.primary.connect() as conn:
            row = conn.execute(
                "SELECT current_setting('wal_level') <> 'minimal',"
                " current_setting('max_wal_senders')::int > 0,"
                " current_setting('max_replication_slots')::int > 0"
            ).fetchone()
        assert row is not None
        needed = [
            what
            for what, ok in zip(
                ["wal_level=replica", "max_wal_senders > 0", "max_replication_slots > 0"],
                row,
                strict=True,
            )
            if not ok
        ]
        if needed:
            raise PostgresReplicaError(
                f"the primary {self.primary!r} allows no replica; it needs " + ", ".join(needed)
            )

    def _wait_in_recovery(self) -> None:
        """Poll until the server answers, and answers that it is a standby."""
        deadline = time.monotonic() + _START_TIMEOUT
        error = "it did not answer"
        while time.monotonic() < deadline:
            try:
                with self.connect() as conn:
                    row = conn.execute("SELECT pg_is_in_recovery()").fetchone()
            except psycopg.OperationalError as exc:
                error = str(exc).strip()
            else:
                if row == (True,):
                    return
                error = "it is not in recovery"
            time.sleep(_POLL_INTERVAL)
        raise PostgresReplicaError(
            f"the replica did not come up as a standby within {_START_TIMEOUT:.0f} s: {error}"
            f"\nserver log ({self.log_file}):\n{tail(self.log_file)}"
        )

    def _drop_slot(self) -> None:
        """Drop the slot on the primary once the primary has let go of our connection."""
        slot, self._slot = self._slot, None
        if slot is None or not self.primary.running:
            return
        deadline = time.monotonic() + _SLOT_DROP_TIMEOUT
        # The primary may be gone meanwhile (atexit stops servers in any order).
        with contextlib.suppress(psycopg.Error), self.primary.connect() as conn:
            while time.monotonic() < deadline:
                row = conn.execute(
                    "SELECT active FROM pg_replication_slots WHERE slot_name = %s", [slot]
                ).fetchone()
                if row is None:
                    return
                if not row[0]:
                    conn.execute("SELECT pg_drop_replication_slot(%s)", [slot])
                    return
                time.sleep(_POLL_INTERVAL)  # its walsender has yet to notice we are gone

    def wait_caught_up(self, deadline: float = 30.0) -> None:
        """Poll until the replica has replayed all the primary committed before the call.

        The primary's ``pg_current_wal_lsn()`` will not do: it is where WAL has been
        *written* to, and the test cluster commits asynchronously, so a commit just made
        may lie beyond it. Instead one transaction of our own, committed synchronously,
        flushes the WAL up to it, and the replica is caught up once it replays past it.
        """
        with self.primary.connect(autocommit=False) as conn:
            conn.execute("SET LOCAL synchronous_commit = on")
            # Transactional, so that it takes a transaction id whose commit gets flushed.
            row = conn.execute(
                "SELECT pg_logical_emit_message(true, 'sqla_scheduler_replica', '')::text"
            ).fetchone()
            conn.commit()
        assert row is not None
        target: str = row[0]
        until = time.monotonic() + deadline
        with self.connect() as conn:
            while True:
                row = conn.execute(
                    "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn, pg_last_wal_replay_lsn()::text",
                    [target],
                ).fetchone()
                assert row is not None
                if row[0]:
                    return
                if time.monotonic() > until:
                    raise PostgresReplicaError(
                        f"the replica replayed up to {row[1]} only, not {target}, within"
                        f" {deadline:.0f} s\nserver log ({self.log_file}):\n"
                        f"{tail(self.log_file)}"
                    )
                time.sleep(_POLL_INTERVAL)

    def lag(self) -> timedelta | None:
        """How long ago the last transaction it replayed was committed on the primary.

        None before it has replayed any. It grows while the primary commits nothing,
        caught up or not.
        """
        with self.connect() as conn:
            row = conn.execute("SELECT now() - pg_last_xact_replay_timestamp()").fetchone()
        assert row is not None
        lag: timedelta | None = row[0]
        return lag

    def release(self, dbname: str, timeout: float = _RELEASE_TIMEOUT) -> None:
        """End the replica's sessions in ``dbname``, and wait until they are gone.

        Then the primary may wipe or drop the database: a session holding a lock on a
        table would hold up the replay of a ``TRUNCATE`` for ``max_standby_streaming_delay``
        (30 s), and all replay behind it.
        """
        deadline = time.monotonic() + timeout
        with self.connect() as conn:
            while True:
                row = conn.execute(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    [dbname],
                ).fetchone()
                if row is None or row[0] == 0:
                    return
                if time.monotonic() > deadline:
                    raise PostgresReplicaError(
                        f"{row[0]} sessions in {dbname!r} on the replica outlived {timeout} s"
                    )
                time.sleep(_POLL_INTERVAL)

    def __enter__(self) -> PostgresReplica:
        return self.start()

    def __repr__(self) -> str:
        state = f"port={self._port} root={self._root}" if self.running else "stopped"
        return f"<PostgresReplica of {self.primary!r} {state}>"
