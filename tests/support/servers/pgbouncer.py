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

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import psycopg
from psycopg.conninfo import make_conninfo

from tests.support.servers import live
from tests.support.servers.apt import apt_install
from tests.support.servers.mariadb import _binary, _kill_server
from tests.support.servers.postgres import (
    PostgresCluster,
    _free_port,
    _pid_alive,
    _proc_start_time,
    _tail,
)

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
_OWNER_FILE: Final = "owner"
_PID_FILE: Final = "pgbouncer.pid"
_ADMIN_DB: Final = "pgbouncer"
_START_TIMEOUT: Final = 30.0
_STOP_TIMEOUT: Final = 10.0
_PORT_ATTEMPTS: Final = 5
# A directory without an owner file may belong to a run between mkdtemp() and writing it.
_ORPHAN_GRACE_SECONDS: Final = 600.0


class PgBouncerError(RuntimeError):
    """Starting, stopping or talking to the throwaway bouncer failed."""


def ensure_pgbouncer_installed() -> Path:
    """The path of ``pgbouncer``, installing Debian's ``pgbouncer`` package if absent.

    Installing needs root and ``apt-get``; otherwise the error says what to install.
    """
    found = _binary("pgbouncer")
    if found is not None:
        return Path(found)
    hint = "Install PgBouncer (apt-get install pgbouncer) and run again."
    apt_get = shutil.which("apt-get")
    if os.geteuid() != 0 or apt_get is None:
        raise PgBouncerError(
            f"pgbouncer not found, and it cannot be installed here (it takes root and "
            f"apt-get). {hint}"
        )
    apt_install(
        apt_get,
        "pgbouncer",
        installed=lambda: _binary("pgbouncer") is not None,
        hint=hint,
        error=PgBouncerError,
    )
    found = _binary("pgbouncer")
    if found is None:
        raise PgBouncerError(f"pgbouncer was installed but is not found. {hint}")
    return Path(found)


def _read_pid(root: Path) -> int | None:
    try:
        return int((root / _PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def cleanup_stale_bouncers(base_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Kill and delete the bouncers of runs whose process (in the ``owner`` file) is gone."""
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
            _kill_server(pid, root)  # only if its argv names this directory
        shutil.rmtree(root, ignore_errors=True)
        removed.append(root)
    return removed


class PgBouncer:
    """A disposable PgBouncer in a temporary directory, in front of ``cluster``.

    :param cluster: the running cluster it forwards every database to.
    :param settings: ``[pgbouncer]`` settings, e.g. ``{"default_pool_size": 1}``, applied
        after the defaults so they can override them.
    :param base_dir: where to create the temporary directory; default the system temp
        dir. As root it must be traversable by the ``postgres`` user.
    """

    host: Final = "127.0.0.1"
    user: Final = _SERVER_USER

    def __init__(
        self,
        cluster: PostgresCluster,
        settings: Mapping[str, object] | None = None,
        *,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        self.cluster = cluster
        self.settings: dict[str, object] = dict(settings or {})
        self._base_dir = base_dir
        self._root: Path | None = None
        self._port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._owner_pid = os.getpid()
        # Popen(user=) rather than runuser, as for MariaDB: the child keeps our limits on
        # open files, which max_client_conn needs.
        self._as_user = _SERVER_USER if os.geteuid() == 0 else None

    @property
    def running(self) -> bool:
        return self._process is not None

    @property
    def port(self) -> int:
        if self._port is None:
            raise PgBouncerError("bouncer is not started")
        return self._port

    @property
    def root(self) -> Path:
        """The temporary directory: ini, auth file, socket, pid file and log."""
        if self._root is None:
            raise PgBouncerError("bouncer is not started")
        return self._root

    @property
    def config_file(self) -> Path:
        return self.root / "pgbouncer.ini"

    @property
    def log_file(self) -> Path:
        return self.root / "pgbouncer.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def url(self, dbname: str = "postgres", driver: str = "psycopg") -> str:
        """SQLAlchemy URL through the bouncer, like :meth:`PostgresCluster.url`."""
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        db = urllib.parse.quote(dbname, safe="")
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{db}"

    def dsn(self, dbname: str = "postgres") -> str:
        """libpq conninfo string through the bouncer, for ``psycopg.connect()``."""
        return make_conninfo(host=self.host, port=self.port, user=self.user, dbname=dbname)

    def connect(
        self, dbname: str = "postgres", *, autocommit: bool = True
    ) -> psycopg.Connection[Any]:
        """A raw psycopg connection through the bouncer (autocommit by default). Close it."""
        return psycopg.connect(self.dsn(dbname), autocommit=autocommit, connect_timeout=10)

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

    def start(self) -> PgBouncer:
        """Write the ini in a new temp dir and start the bouncer on it. Returns self."""
        if self._root is not None:
            raise PgBouncerError("bouncer already started")
        with contextlib.suppress(Exception):
            cleanup_stale_bouncers(self._base_dir)
        binary = ensure_pgbouncer_installed()
        self._owner_pid = os.getpid()
        self._root = root = Path(tempfile.mkdtemp(prefix=DIR_PREFIX, dir=self._base_dir))
        live.register(self)
        try:
            (root / _OWNER_FILE).write_text(
                f"{os.getpid()} {_proc_start_time(os.getpid()) or ''}\n"
            )
            (root / "userlist.txt").write_text(f'"{self.user}" ""\n')
            if self._as_user is not None:
                shutil.chown(root, user=self._as_user, group=self._as_user)
            self._start_server(binary)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the bouncer and delete its directory. Idempotent."""
        root = self._root
        if root is None:
            return
        try:
            self._terminate()
        finally:
            shutil.rmtree(root, ignore_errors=True)
            self._root = self._port = None
            live.unregister(self)

    def _start_server(self, binary: Path) -> None:
        """Start pgbouncer in the foreground, on another free port while the port proves taken."""
        log = ""
        for _attempt in range(_PORT_ATTEMPTS):
            self._port = _free_port(self.host)
            self.config_file.write_text(self.config_text())
            user_args: dict[str, Any] = {}
            if self._as_user is not None:
                user_args = {"user": self._as_user, "group": self._as_user, "extra_groups": []}
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
                    **user_args,
                )
            error = self._wait_until_ready(offset)
            if error is None:
                return
            self._terminate()
            log = f"{error}; its log ({self.log_file}):\n{_tail(self.log_file, offset=offset)}"
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

    def _terminate(self) -> None:
        """SIGTERM the bouncer (1.18: an immediate shutdown), SIGKILL it after a deadline."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(_STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def __enter__(self) -> PgBouncer:
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
        return f"<PgBouncer {state}>"
