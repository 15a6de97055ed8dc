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
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import pymysql

from tests.support.servers import live
from tests.support.servers.apt import apt_install
from tests.support.servers.postgres import (
    _free_port,
    _pid_alive,
    _proc_cmdline,
    _proc_start_time,
    _tail,
)

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
_OWNER_FILE: Final = "owner"
_PID_FILE: Final = "mariadbd.pid"
# root is not on a non-root user's PATH, but that is where Debian puts it.
_SEARCH_PATH: Final = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
_START_TIMEOUT: Final = 60.0
_STOP_TIMEOUT: Final = 30.0
_PORT_ATTEMPTS: Final = 5
# A directory without an owner file may belong to a run between mkdtemp() and writing it.
_ORPHAN_GRACE_SECONDS: Final = 600.0


class MariaDBServerError(RuntimeError):
    """Starting, stopping or talking to the throwaway server failed."""


def _binary(name: str) -> str | None:
    return shutil.which(name, path=_SEARCH_PATH)


def ensure_mariadb_installed() -> Path:
    """The path of ``mariadbd``, installing the ``mariadb-server`` apt package if absent.

    Installing needs root and ``apt-get``; otherwise the error says what to install.
    """
    found = _binary("mariadbd")
    if found is not None and _binary("mariadb-install-db") is not None:
        return Path(found)
    hint = "Install the MariaDB server (apt-get install mariadb-server) and run again."
    apt_get = shutil.which("apt-get")
    if os.geteuid() != 0 or apt_get is None:
        raise MariaDBServerError(
            f"mariadbd or mariadb-install-db not found, and they cannot be installed "
            f"here (it takes root and apt-get). {hint}"
        )
    apt_install(
        apt_get,
        "mariadb-server",
        installed=lambda: (
            _binary("mariadbd") is not None and _binary("mariadb-install-db") is not None
        ),
        hint=hint,
        error=MariaDBServerError,
    )
    found = _binary("mariadbd")
    if found is None:
        raise MariaDBServerError(f"mariadb-server was installed but mariadbd is not found. {hint}")
    return Path(found)


def _read_pid(root: Path) -> int | None:
    try:
        return int((root / _PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def _kill_server(pid: int, root: Path) -> None:
    """SIGKILL a mariadbd of ours (its directory in argv), and wait until it is gone."""
    cmdline = _proc_cmdline(pid)
    if cmdline is None or str(root) not in cmdline:
        return  # gone, or the pid was reused by something else
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _pid_alive(pid) and _proc_cmdline(pid):
        time.sleep(0.05)


def cleanup_stale_servers(base_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Kill and delete the servers of runs whose process (in the ``owner`` file) is gone."""
    removed = []
    for root in Path(base_dir or tempfile.gettempdir()).glob(f"{DIR_PREFIX}*"):
        try:
            pid_s, _, start_s = (root / _OWNER_FILE).read_text().strip().partition(" ")
            owner = int(pid_s)
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                if time.time() - root.stat().st_mtime < _ORPHAN_GRACE_SECONDS:
                    continue
        else:
            if _pid_alive(owner) and _proc_start_time(owner) in (start_s, None):
                continue
        pid = _read_pid(root)
        if pid is not None:
            _kill_server(pid, root)
        shutil.rmtree(root, ignore_errors=True)
        removed.append(root)
    return removed


class MariaDBServer:
    """A disposable MariaDB server in a temporary directory.

    :param settings: extra server options, e.g. ``{"default-time-zone": "+05:00"}``
        (``--name=value``; ``_`` and ``-`` alike), applied after the defaults.
    :param durable: flush the InnoDB log at each commit (the server default) instead of
        once a second, and keep the doublewrite buffer (for benchmarks).
    :param base_dir: where to create the temporary directory; default the system temp
        dir. As root it must be traversable by the ``mysql`` user.
    """

    host: Final = "127.0.0.1"
    user: Final = "root"

    def __init__(
        self,
        settings: Mapping[str, object] | None = None,
        *,
        durable: bool = False,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.settings = {_option(key): value for key, value in (settings or {}).items()}
        self.durable = durable
        self._base_dir = base_dir
        self._root: Path | None = None
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._owner_pid = os.getpid()
        # Popen(user=) rather than runuser: the child is mariadbd itself, with our limits
        # (runuser's PAM session cuts the open files to 1024, and the table cache with them).
        self._as_user = _SERVER_USER if os.geteuid() == 0 else None

    @property
    def running(self) -> bool:
        return self._process is not None

    @property
    def port(self) -> int:
        if self._port is None:
            raise MariaDBServerError("server is not started")
        return self._port

    @property
    def root(self) -> Path:
        """The temporary directory: data dir, socket, pid file and error log."""
        if self._root is None:
            raise MariaDBServerError("server is not started")
        return self._root

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_path(self) -> Path:
        return self.root / "mariadbd.sock"

    @property
    def log_file(self) -> Path:
        return self.root / "error.log"

    @property
    def server_pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

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

    def start(self) -> MariaDBServer:
        """Initialize a data dir in a new temp dir and start a server on it. Returns self."""
        if self._root is not None:
            raise MariaDBServerError("server already started")
        with contextlib.suppress(Exception):
            cleanup_stale_servers(self._base_dir)
        mariadbd = ensure_mariadb_installed()
        install_db = _binary("mariadb-install-db") or "mariadb-install-db"
        self._owner_pid = os.getpid()
        self._root = root = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=self._base_dir))
        live.register(self)
        try:
            (root / _OWNER_FILE).write_text(
                f"{os.getpid()} {_proc_start_time(os.getpid()) or ''}\n"
            )
            if self._as_user is not None:
                shutil.chown(root, user=self._as_user, group=self._as_user)
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
                    f"--tmpdir={root}",
                ]
            )
            self._start_server(mariadbd, new_port=True)
        except BaseException:
            self.stop()
            raise
        return self

    def restart(self) -> None:
        """Stop the server (drops all sessions) and start it again on the same port."""
        self._terminate()
        self._start_server(ensure_mariadb_installed(), new_port=False)

    def stop(self) -> None:
        """Stop the server and delete its directory. Idempotent."""
        root = self._root
        if root is None:
            return
        try:
            self._terminate()
        finally:
            shutil.rmtree(root, ignore_errors=True)
            self._root = self._port = None
            live.unregister(self)

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

    def _user_args(self) -> dict[str, Any]:
        if self._as_user is None:
            return {}
        return {"user": self._as_user, "group": self._as_user, "extra_groups": []}

    def _start_server(self, mariadbd: Path, *, new_port: bool) -> None:
        """Start mariadbd, on another free port while the port proves taken."""
        log = ""
        for _attempt in range(_PORT_ATTEMPTS if new_port else 1):
            if new_port:
                self._port = _free_port(self.host)
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
            log = _tail(self.log_file, offset=offset)
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

    def _terminate(self) -> None:
        """SIGTERM the server (a clean shutdown), SIGKILL it after a deadline."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> MariaDBServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"port={self._port} root={self._root}" if self.running else "stopped"
        return f"<MariaDBServer {state}>"


def quote(name: str) -> str:
    """A MariaDB identifier in backticks."""
    return "`" + name.replace("`", "``") + "`"


def _option(key: str) -> str:
    return key.removeprefix("--").replace("_", "-")


def _value(value: object) -> str:
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    return str(value)
