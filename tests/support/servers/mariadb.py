"""A throwaway MariaDB server for the test suite, like ``_postgres`` for PostgreSQL.

Plain module (no pytest dependency)::

    with MariaDBServer() as server:
        server.create_database("t1")
        engine = sqlalchemy.create_engine(server.url("t1"))

The server lives in a fresh temporary directory, listens on ``127.0.0.1`` only, on a free
port, and lets ``root`` in from there without a password. :meth:`MariaDBServer.stop`
stops it and removes its directory; an :mod:`atexit` hook and a ``SIGTERM`` hook stop any
server left running, and the next :meth:`MariaDBServer.start` reaps the servers of a run
that was killed outright.

As root, the server runs as the ``mysql`` OS user (``mariadbd`` refuses to run as root).
Its settings are the compiled-in defaults (``--no-defaults``) but for the few below:
the time zone and the character set stay the server's own, so that tests prove the
library sets what it needs.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import socket
import subprocess
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import ClassVar, Final

import pymysql

from tests.support.servers.apt import installed_as_root
from tests.support.servers.base import ChildServer, free_port, kill_by_pid_file, reap_stale, tail

__all__ = [
    "DIR_PREFIX",
    "MariaDBServer",
    "MariaDBServerError",
    "cleanup_stale_servers",
    "ensure_mariadb_installed",
]

DIR_PREFIX: Final = "sqla-scheduler-mariadb-"
"""Prefix of the temporary directories holding the servers."""

_SERVER_USER: Final = "mysql"
_PID_FILE: Final = "mariadbd.pid"
# root is not on a non-root user's PATH, but that is where Debian puts it.
_SEARCH_PATH: Final = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
_START_TIMEOUT: Final = 60.0
_STOP_TIMEOUT: Final = 30.0
_PORT_ATTEMPTS: Final = 5


class MariaDBServerError(RuntimeError):
    """Starting, stopping or talking to the throwaway server failed."""


def _binary(name: str) -> str | None:
    return shutil.which(name, path=_SEARCH_PATH)


def ensure_mariadb_installed() -> Path:
    """The path of ``mariadbd``, installing the ``mariadb-server`` apt package if absent
    (or if ``mariadb-install-db`` is).

    Installing needs root and ``apt-get``; otherwise the error says what to install.
    """
    return installed_as_root(
        "mariadb-server",
        _find_mariadbd,
        what="mariadbd or mariadb-install-db",
        hint="Install the MariaDB server (apt-get install mariadb-server) and run again.",
        error=MariaDBServerError,
    )


def _find_mariadbd() -> Path | None:
    found = _binary("mariadbd")
    if found is None or _binary("mariadb-install-db") is None:
        return None
    return Path(found)


def cleanup_stale_servers(base_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Kill and delete the servers of runs whose process (in the ``owner`` file) is gone."""
    return reap_stale(DIR_PREFIX, base_dir, kill_by_pid_file(_PID_FILE))


class MariaDBServer(ChildServer):
    """A disposable MariaDB server in a temporary directory.

    :param settings: extra server options, e.g. ``{"default-time-zone": "+05:00"}``
        (``--name=value``; ``_`` and ``-`` alike), applied after the defaults.
    :param durable: flush the InnoDB log at each commit (the server default) instead of
        once a second, and keep the doublewrite buffer (for benchmarks).
    :param base_dir: where to create the temporary directory; default the system temp
        dir. As root it must be traversable by the ``mysql`` user.
    """

    user: Final = "root"
    dir_prefix: ClassVar[str] = DIR_PREFIX
    noun: ClassVar[str] = "server"
    error: ClassVar[type[Exception]] = MariaDBServerError
    stop_timeout: ClassVar[float] = _STOP_TIMEOUT

    def __init__(
        self,
        settings: Mapping[str, object] | None = None,
        *,
        durable: bool = False,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(base_dir, as_user=_SERVER_USER)
        self.settings = {_option(key): value for key, value in (settings or {}).items()}
        self.durable = durable

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_path(self) -> Path:
        return self.root / "mariadbd.sock"

    @property
    def log_file(self) -> Path:
        return self.root / "error.log"

    def url(self, dbname: str = "", driver: str = "pymysql") -> str:
        """SQLAlchemy URL, e.g. ``mysql+pymysql://root@127.0.0.1:3306/t1?ssl_disabled=true``.

        PyMySQL's with ``ssl_disabled``: without it PyMySQL 1.2 builds a TLS context for
        each new connection, 20 ms of CPU, though the server has no TLS to offer.
        """
        db = urllib.parse.quote(dbname, safe="")
        query = "?ssl_disabled=true" if driver == "pymysql" else ""
        return f"mysql+{driver}://{self.user}@{self.host}:{self.port}/{db}{query}"

    def connect(self, dbname: str | None = None) -> pymysql.Connection:
        """A raw pymysql connection in autocommit mode. Close it (use ``with``)."""
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            database=dbname,
            autocommit=True,
            connect_timeout=10,
            # Else pymysql (1.2+) builds a TLS context to offer each time: 20 ms of CPU.
            ssl_disabled=True,
        )

    def create_database(self, name: str) -> None:
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {quote(name)}")

    def drop_database(self, name: str, *, missing_ok: bool = True) -> None:
        """Kill the sessions using ``name``, then drop it (they would block the drop)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(
                "SELECT id FROM information_schema.processlist"
                " WHERE db = %s AND id <> CONNECTION_ID()",
                (name,),
            )
            for (session,) in cur.fetchall():
                with contextlib.suppress(pymysql.err.OperationalError):  # gone meanwhile
                    cur.execute("KILL CONNECTION %s", (session,))
            cur.execute(f"DROP DATABASE {'IF EXISTS ' if missing_ok else ''}{quote(name)}")

    def server_options(self) -> list[str]:
        """The options after ``mariadbd --no-defaults``."""
        options: dict[str, object] = {
            "datadir": self.data_dir,
            "socket": self.socket_path,
            "pid-file": self.root / _PID_FILE,
            "log-error": self.log_file,
            "tmpdir": self.root,
            "port": self.port,
            "bind-address": self.host,
            "skip-networking": 0,
            "skip-name-resolve": 1,
            "skip-log-bin": 1,
            "max-connections": 500,
            "innodb-buffer-pool-size": "64M",
            "innodb-log-file-size": "16M",
        }
        if not self.durable:
            options |= {"innodb-flush-log-at-trx-commit": 2, "innodb-doublewrite": 0}
        options |= self.settings
        return [f"--{key}={_value(value)}" for key, value in options.items()]

    def _reap_stale(self) -> None:
        cleanup_stale_servers(self._base_dir)

    def _prepare(self) -> None:
        ensure_mariadb_installed()

    def _launch(self) -> None:
        """Initialize a data dir in the directory and start a server on it."""
        mariadbd = ensure_mariadb_installed()
        install_db = _binary("mariadb-install-db") or "mariadb-install-db"
        self._own_root()
        self._run(
            [
                install_db,
                "--no-defaults",
                "--auth-root-authentication-method=normal",
                "--skip-test-db",
                "--skip-name-resolve",
                f"--datadir={self.data_dir}",
                "--innodb-log-file-size=16M",
                # its own: concurrent installs in one /tmp clash on temporary tables
                f"--tmpdir={self.root}",
            ]
        )
        self._start_server(mariadbd, new_port=True)

    def restart(self) -> None:
        """Stop the server (drops all sessions) and start it again on the same port."""
        self._terminate()
        self._start_server(ensure_mariadb_installed(), new_port=False)

    def _run(self, argv: Sequence[str]) -> None:
        try:
            proc = subprocess.run(
                argv,
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=_START_TIMEOUT,
                **self._user_args(),
            )
        except subprocess.TimeoutExpired as exc:
            raise MariaDBServerError(f"{shlex.join(argv)} timed out") from exc
        if proc.returncode != 0:
            raise MariaDBServerError(
                f"{shlex.join(argv)} exited with {proc.returncode}\n{proc.stdout}{proc.stderr}"
            )

    def _start_server(self, mariadbd: Path, *, new_port: bool) -> None:
        """Start mariadbd, on another free port while the port proves taken."""
        log = ""
        for _attempt in range(_PORT_ATTEMPTS if new_port else 1):
            if new_port:
                self._port = free_port(self.host)
            offset = self.log_file.stat().st_size if self.log_file.exists() else 0
            self._process = subprocess.Popen(
                [str(mariadbd), "--no-defaults", *self.server_options()],
                cwd=self.root,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                **self._user_args(),
            )
            if self._wait_until_ready():
                return
            self._terminate()
            log = tail(self.log_file, offset=offset)
            if "Address already in use" not in log:
                break
        raise MariaDBServerError(
            f"mariadbd did not start on port {self._port}; its log ({self.log_file}):\n{log}"
        )

    def _wait_until_ready(self) -> bool:
        """Poll until the server answers on its socket, or exits.

        The socket file is ours alone, and the server makes it after binding its TCP port;
        a TCP connection could reach another process that took the port meanwhile.
        """
        assert self._process is not None
        deadline = time.monotonic() + _START_TIMEOUT
        while self._process.poll() is None and time.monotonic() < deadline:
            # Our own socket: pymysql leaks the one it makes when connecting fails.
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(5)
                sock.connect(str(self.socket_path))
            except OSError:
                sock.close()
                time.sleep(0.02)
                continue
            conn = pymysql.connect(
                user=self.user, read_timeout=5, ssl_disabled=True, defer_connect=True
            )
            try:
                conn.connect(sock)  # closes sock if it fails
            except pymysql.err.OperationalError:
                time.sleep(0.02)
                continue
            conn.close()
            return True
        return False


def quote(name: str) -> str:
    """A MariaDB identifier in backticks."""
    return "`" + name.replace("`", "``") + "`"


def _option(key: str) -> str:
    return key.removeprefix("--").replace("_", "-")


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    return str(value)
