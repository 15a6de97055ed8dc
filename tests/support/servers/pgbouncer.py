"""A throwaway PgBouncer in transaction pooling mode, in front of a ``_postgres`` cluster.

Plain module (no pytest dependency), like the servers' own::

    with PostgresCluster() as pg, PgBouncer(pg) as bouncer:
        pg.create_database("t1")
        engine = sqlalchemy.create_engine(bouncer.url("t1"))

The bouncer lives in a fresh temporary directory, listens on ``127.0.0.1`` only, on a
free port, and forwards any database name to the cluster (``* =`` in ``[databases]``),
letting the ``postgres`` user in without a password, as the cluster does. Transaction
pooling is what makes it worth testing against: a client's server connection is its own
for one transaction only, so session state (prepared statements, ``LISTEN``, ``SET``,
advisory locks) does not follow the client from one transaction to the next.

:meth:`PgBouncer.stop` stops it and removes its directory; the hooks of ``live``
stop a bouncer left running, and the next :meth:`PgBouncer.start` reaps the bouncers of a
run that was killed outright. As root, it runs as the ``postgres`` OS user (PgBouncer
refuses to run as root).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

import psycopg
from psycopg.conninfo import make_conninfo

from tests.support.servers.apt import installed_as_root
from tests.support.servers.base import ChildServer, free_port, kill_by_pid_file, reap_stale, tail
from tests.support.servers.mariadb import _binary
from tests.support.servers.postgres import PostgresCluster, PostgresEndpoint

__all__ = [
    "DIR_PREFIX",
    "PgBouncer",
    "PgBouncerError",
    "cleanup_stale_bouncers",
    "ensure_pgbouncer_installed",
]

DIR_PREFIX: Final = "sqla-scheduler-pgbouncer-"
"""Prefix of the temporary directories holding the bouncers."""

_SERVER_USER: Final = "postgres"
_PID_FILE: Final = "pgbouncer.pid"
_ADMIN_DB: Final = "pgbouncer"
_START_TIMEOUT: Final = 30.0
_STOP_TIMEOUT: Final = 10.0
_PORT_ATTEMPTS: Final = 5


class PgBouncerError(RuntimeError):
    """Starting, stopping or talking to the throwaway bouncer failed."""


def ensure_pgbouncer_installed() -> Path:
    """The path of ``pgbouncer``, installing Debian's ``pgbouncer`` package if absent.

    Installing needs root and ``apt-get``; otherwise the error says what to install.
    """
    return installed_as_root(
        "pgbouncer",
        lambda: _found(_binary("pgbouncer")),
        what="pgbouncer",
        hint="Install PgBouncer (apt-get install pgbouncer) and run again.",
        error=PgBouncerError,
    )


def _found(path: str | None) -> Path | None:
    return Path(path) if path is not None else None


def cleanup_stale_bouncers(base_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Kill and delete the bouncers of runs whose process (in the ``owner`` file) is gone."""
    return reap_stale(DIR_PREFIX, base_dir, kill_by_pid_file(_PID_FILE))


class PgBouncer(PostgresEndpoint, ChildServer):
    """A disposable PgBouncer in a temporary directory, in front of ``cluster``.

    :param cluster: the running cluster it forwards every database to.
    :param settings: ``[pgbouncer]`` settings, e.g. ``{"default_pool_size": 1}``, applied
        after the defaults so they can override them.
    :param base_dir: where to create the temporary directory; default the system temp
        dir. As root it must be traversable by the ``postgres`` user.
    """

    user: Final = _SERVER_USER
    dir_prefix: ClassVar[str] = DIR_PREFIX
    noun: ClassVar[str] = "bouncer"
    error: ClassVar[type[Exception]] = PgBouncerError
    stop_timeout: ClassVar[float] = _STOP_TIMEOUT

    def __init__(
        self,
        cluster: PostgresCluster,
        settings: Mapping[str, object] | None = None,
        *,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        # as the server's user when root: it keeps our limits on open files, which
        # max_client_conn needs
        super().__init__(base_dir, as_user=_SERVER_USER)
        self.cluster = cluster
        self.settings: dict[str, object] = dict(settings or {})

    @property
    def config_file(self) -> Path:
        return self.root / "pgbouncer.ini"

    @property
    def log_file(self) -> Path:
        return self.root / "pgbouncer.log"

    def admin(self, command: str) -> list[tuple[Any, ...]]:
        """Run a command on the admin console (``SHOW POOLS``, ``KILL db``...), its rows."""
        # The console speaks the simple query protocol only: a client-side-binding cursor.
        with (
            psycopg.connect(
                self.dsn(_ADMIN_DB),
                autocommit=True,
                connect_timeout=10,
                cursor_factory=psycopg.ClientCursor,
            ) as conn,
            conn.cursor() as cur,
        ):
            cur.execute(command)
            return cur.fetchall() if cur.description is not None else []

    def config(self) -> dict[str, str]:
        """The running settings, as ``SHOW CONFIG`` gives them."""
        return {row[0]: row[1] for row in self.admin("SHOW CONFIG")}

    def release(self, dbname: str, timeout: float = 10.0) -> None:
        """Close the bouncer's server connections to ``dbname`` and wait until the cluster
        has ended their sessions, so the database can be wiped or dropped."""
        if any(row[0] == dbname for row in self.admin("SHOW DATABASES")):
            self.admin(f'KILL "{dbname}"')
            self.admin(f'RESUME "{dbname}"')  # KILL leaves it paused for new clients
        deadline = time.monotonic() + timeout
        with self.cluster.connect() as conn:
            while True:
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity"
                    " WHERE datname = %s AND pid <> pg_backend_pid()",
                    [dbname],
                ).fetchone()
                if row is None or row[0] == 0 or time.monotonic() > deadline:
                    return
                time.sleep(0.02)

    def config_text(self) -> str:
        """The ini file: the defaults below, then :attr:`settings`."""
        options: dict[str, object] = {
            "listen_addr": self.host,
            "listen_port": self.port,
            "unix_socket_dir": self.root,
            "auth_type": "trust",
            "auth_file": self.root / "userlist.txt",
            "admin_users": self.user,
            "pool_mode": "transaction",
            "max_client_conn": 500,
            "default_pool_size": 20,
            # psycopg and SQLAlchemy may send these; PgBouncer refuses unknown ones.
            "ignore_startup_parameters": "extra_float_digits,options",
            "pidfile": self.root / _PID_FILE,
        }
        options |= self.settings
        server = f"host={self.cluster.host} port={self.cluster.port}"
        lines = ["[databases]", f"* = {server}", "", "[pgbouncer]"]
        lines += [f"{key} = {value}" for key, value in options.items()]
        return "\n".join(lines) + "\n"

    def _reap_stale(self) -> None:
        cleanup_stale_bouncers(self._base_dir)

    def _prepare(self) -> None:
        ensure_pgbouncer_installed()

    def _launch(self) -> None:
        """Write the ini and the auth file in the directory and start the bouncer on it."""
        (self.root / "userlist.txt").write_text(f'"{self.user}" ""\n')
        self._own_root()
        self._start_server(ensure_pgbouncer_installed())

    def _start_server(self, binary: Path) -> None:
        """Start pgbouncer in the foreground, on another free port while the port proves taken."""
        log = ""
        for _attempt in range(_PORT_ATTEMPTS):
            self._port = free_port(self.host)
            self.config_file.write_text(self.config_text())
            with self.log_file.open("ab") as log_file:
                offset = log_file.tell()
                # Its log is its stderr: a ``logfile`` setting misses the errors met
                # before that line of the ini is read.
                self._process = subprocess.Popen(
                    [str(binary), str(self.config_file)],
                    cwd=self.root,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=log_file,
                    **self._user_args(),
                )
            error = self._wait_until_ready(offset)
            if error is None:
                return
            self._terminate()
            log = f"{error}; its log ({self.log_file}):\n{tail(self.log_file, offset=offset)}"
            if "Address already in use" not in log:
                break
        raise PgBouncerError(f"pgbouncer did not start on port {self._port}: {log}")

    def _wait_until_ready(self, log_offset: int) -> str | None:
        """Poll until a ``SELECT 1`` through the bouncer reaches the cluster; else why not.

        Through its socket in our directory, ours alone: a TCP connection could reach
        another process that took the port meanwhile. A port it cannot bind, PgBouncer
        only warns of, and serves the socket alone: its log tells.
        """
        assert self._process is not None
        socket_dsn = make_conninfo(
            host=str(self.root), port=self.port, user=self.user, dbname="postgres"
        )
        deadline = time.monotonic() + _START_TIMEOUT
        error = "it did not answer"
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                return f"it exited with {self._process.returncode}"
            if not (self.root / f".s.PGSQL.{self.port}").exists():
                time.sleep(0.02)
                continue
            try:
                with psycopg.connect(socket_dsn, autocommit=True, connect_timeout=5) as conn:
                    conn.execute("SELECT 1")
            except psycopg.OperationalError as exc:
                error = str(exc).strip()
                time.sleep(0.05)
                continue
            with self.log_file.open("rb") as log:
                log.seek(log_offset)
                if f"listening on {self.host}:{self.port}\n".encode() in log.read():
                    return None
            return f"it does not listen on {self.host}:{self.port}"
        return f"no SELECT 1 through it within {_START_TIMEOUT:.0f} s; the last error: {error}"
