"""A throwaway PostgreSQL cluster for the test suite.

Plain module (no pytest dependency) so that ``conftest.py``, benchmarks and ad-hoc
scripts can all use it::

    with PostgresCluster() as pg:
        pg.create_database("t1")
        engine = sqlalchemy.create_engine(pg.url("t1"))

The cluster lives in a fresh temporary directory, listens on ``127.0.0.1`` only, on a
free port, with trust authentication for the ``postgres`` superuser. It is stopped and
its directory removed by :meth:`PostgresCluster.stop`; an :mod:`atexit` hook and a
``SIGTERM`` hook stop any cluster left running, and clusters left behind by a run that
was killed outright (``SIGKILL``, OOM, power loss) are reaped by the next
:meth:`PostgresCluster.start`.

When running as root the server binaries are run as the ``postgres`` OS user via
``runuser`` (the server refuses to run as root).
"""

from __future__ import annotations

import glob
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Final, Literal, Protocol

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.support.servers.apt import apt_install
from tests.support.servers.base import (
    ThrowawayServer,
    free_port,
    pid_alive,
    proc_cmdline,
    reap_stale,
    tail,
)

__all__ = [
    "DIR_PREFIX",
    "PostgresCluster",
    "PostgresClusterError",
    "PostgresEndpoint",
    "cleanup_stale_clusters",
    "ensure_pg_installed",
    "find_pg_bin",
]

DIR_PREFIX: Final = "sqla-scheduler-pg-"
"""Prefix of the temporary directories holding the clusters."""

_SERVER_BINARIES: Final = ("initdb", "pg_ctl", "postgres")
_PG_USER: Final = "postgres"
_SUBPROCESS_TIMEOUT: Final = 180.0
_START_TIMEOUT: Final = 60
_PORT_ATTEMPTS: Final = 5

ShutdownMode = Literal["smart", "fast", "immediate"]


class PostgresClusterError(RuntimeError):
    """Starting, stopping or talking to the throwaway cluster failed."""


# --------------------------------------------------------------------------------------
# Locating / installing the server binaries
# --------------------------------------------------------------------------------------


def _has_server_binaries(directory: Path) -> bool:
    return all(os.access(directory / name, os.X_OK) for name in _SERVER_BINARIES)


def _version_key(path: Path) -> tuple[int, ...]:
    # /usr/lib/postgresql/<version>/bin -> numeric version, so that 9.6 < 10 < 15.
    parts = re.findall(r"\d+", path.parent.name)
    return tuple(int(p) for p in parts) if parts else (-1,)


def find_pg_bin() -> Path | None:
    """Return the directory holding ``initdb``, ``pg_ctl`` and ``postgres``, or None.

    Looked up, in order: the ``PG_BIN`` environment variable, ``pg_config --bindir``,
    ``/usr/lib/postgresql/*/bin`` (highest version first), then ``PATH``. A candidate is
    only accepted if it contains all three server binaries (``pg_config`` from a
    client-only install points at a directory without ``initdb``).
    """
    env = os.environ.get("PG_BIN")
    if env:
        candidate = Path(env).expanduser()
        if _has_server_binaries(candidate):
            return candidate.resolve()

    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"],
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        if out and _has_server_binaries(Path(out)):
            return Path(out).resolve()

    debian_dirs = sorted(
        (Path(p) for p in glob.glob("/usr/lib/postgresql/*/bin")),
        key=_version_key,
        reverse=True,
    )
    for candidate in debian_dirs:
        if _has_server_binaries(candidate):
            return candidate

    initdb = shutil.which("initdb")
    if initdb:
        candidate = Path(initdb).resolve().parent
        if _has_server_binaries(candidate):
            return candidate
    return None


def ensure_pg_installed() -> Path:
    """Return :func:`find_pg_bin`, installing the ``postgresql`` apt package if needed.

    Installing needs root or passwordless ``sudo`` and ``apt-get``; otherwise a
    :class:`RuntimeError` explains how to provide a server.
    """
    found = find_pg_bin()
    if found is not None:
        return found

    hint = (
        "Install the PostgreSQL server (e.g. `apt-get install postgresql`) or set PG_BIN "
        "to the directory containing initdb, pg_ctl and postgres."
    )
    apt_get = shutil.which("apt-get")
    if apt_get is None:
        raise RuntimeError(
            f"PostgreSQL server binaries not found and apt-get is unavailable. {hint}"
        )

    prefix: list[str]
    if os.geteuid() == 0:
        prefix = []
    else:
        sudo = shutil.which("sudo")
        if sudo is None or (
            subprocess.run([sudo, "-n", "true"], capture_output=True, check=False).returncode != 0
        ):
            raise RuntimeError(
                "PostgreSQL server binaries not found, and they cannot be installed "
                f"automatically: not running as root and no passwordless sudo. {hint}"
            )
        prefix = [sudo, "-n", "env", "DEBIAN_FRONTEND=noninteractive"]

    apt_install(
        apt_get,
        "postgresql",
        installed=lambda: find_pg_bin() is not None,
        hint=hint,
        error=lambda text: RuntimeError(f"Installing PostgreSQL failed: {text}"),
        prefix=prefix,
    )

    found = find_pg_bin()
    if found is None:
        raise RuntimeError(
            f"PostgreSQL was installed but its server binaries were not found. {hint}"
        )
    return found


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def _read_postmaster_pid(data_dir: Path) -> int | None:
    try:
        first = (data_dir / "postmaster.pid").read_text().splitlines()[0]
        return int(first.strip())
    except (OSError, IndexError, ValueError):
        return None


def _kill_postmaster(pid: int, data_dir: Path, wait: float = 10.0) -> None:
    """Immediate-shutdown a postmaster we own (identified by its data dir in argv)."""
    cmdline = proc_cmdline(pid)
    if cmdline is None or str(data_dir) not in cmdline:
        return  # gone, or the pid was reused by something else: leave it alone
    for sig in (signal.SIGQUIT, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:
            return  # e.g. a root run's leftover seen by a non-root run: not ours to kill
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not pid_alive(pid) or proc_cmdline(pid) in (None, ""):
                return
            time.sleep(0.05)


def cleanup_stale_clusters(base_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """Stop and delete clusters left behind by test runs that died without cleaning up
    (``base.reap_stale``). Returns the directories removed."""
    return reap_stale(DIR_PREFIX, base_dir, _kill_cluster)


def _kill_cluster(root: Path) -> None:
    data_dir = root / "data"
    postmaster = _read_postmaster_pid(data_dir)
    if postmaster is not None:
        _kill_postmaster(postmaster, data_dir)


# --------------------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------------------


class _Endpoint(Protocol):
    host: Final[str]
    user: Final[str]

    @property
    def port(self) -> int: ...


class PostgresEndpoint:
    """How a client reaches a PostgreSQL endpoint at ``host``:``port`` as ``user``: a
    cluster, or a bouncer in front of one."""

    def url(self: _Endpoint, dbname: str = "postgres", driver: str = "psycopg") -> str:
        """SQLAlchemy URL, e.g. ``postgresql+psycopg://postgres@127.0.0.1:5432/postgres``."""
        scheme = f"postgresql+{driver}" if driver else "postgresql"
        db = urllib.parse.quote(dbname, safe="")
        return f"{scheme}://{self.user}@{self.host}:{self.port}/{db}"

    def dsn(self: _Endpoint, dbname: str = "postgres") -> str:
        """libpq conninfo string for ``psycopg.connect()``."""
        return make_conninfo(host=self.host, port=self.port, user=self.user, dbname=dbname)

    def connect(
        self, dbname: str = "postgres", *, autocommit: bool = True
    ) -> psycopg.Connection[Any]:
        """A raw psycopg connection (autocommit by default). Close it (use ``with``)."""
        return psycopg.connect(self.dsn(dbname), autocommit=autocommit, connect_timeout=10)


class PostgresCluster(PostgresEndpoint, ThrowawayServer):
    """A disposable PostgreSQL server in a temporary directory.

    :param settings: extra server settings (``-c name=value``), applied after the
        defaults so they can override them.
    :param durable: keep ``fsync``/``synchronous_commit``/``full_page_writes`` at their
        server defaults (on) instead of turning them off for speed (for benchmarks).
    :param bin_dir: server binaries directory; default :func:`ensure_pg_installed`.
    :param base_dir: where to create the temporary directory; default the system temp
        dir. When running as root it must be traversable by the ``postgres`` user.
    """

    user: Final = _PG_USER
    #: Starts with :data:`DIR_PREFIX`, which :func:`cleanup_stale_clusters` reaps.
    dir_prefix: ClassVar[str] = DIR_PREFIX
    noun: ClassVar[str] = "cluster"
    error: ClassVar[type[Exception]] = PostgresClusterError

    def __init__(
        self,
        settings: Mapping[str, object] | None = None,
        *,
        durable: bool = False,
        bin_dir: str | os.PathLike[str] | None = None,
        base_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(base_dir)
        self.settings: dict[str, object] = dict(settings or {})
        self.durable = durable
        self._bin_dir = Path(bin_dir) if bin_dir is not None else None
        self._as_postgres = os.geteuid() == 0
        self._runuser: str | None = None

    # ----------------------------------------------------------------- properties

    @property
    def bin_dir(self) -> Path:
        if self._bin_dir is None:
            self._bin_dir = ensure_pg_installed()
        return self._bin_dir

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "sock"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    @property
    def cluster_name(self) -> str:
        """Shown in the server processes' titles (``postgres: <name>: checkpointer``)."""
        return self.root.name

    # ----------------------------------------------------------------- databases

    def create_database(
        self,
        name: str,
        template: str | None = None,
        *,
        strategy: Literal["wal_log", "file_copy"] | None = None,
    ) -> None:
        """``CREATE DATABASE name [TEMPLATE template] [STRATEGY strategy]``.

        The template must have no other open connections, or the server refuses.
        ``strategy`` needs PostgreSQL 15+ (the server default there is ``wal_log``).
        """
        query = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if template is not None:
            query = sql.SQL("{} TEMPLATE {}").format(query, sql.Identifier(template))
        if strategy is not None:
            query = sql.SQL("{} STRATEGY {}").format(query, sql.SQL(strategy.upper()))
        with self.connect() as conn:
            conn.execute(query)

    def drop_database(self, name: str, *, missing_ok: bool = True) -> None:
        """``DROP DATABASE [IF EXISTS] name WITH (FORCE)`` (kills its connections)."""
        query = sql.SQL("DROP DATABASE {}{} WITH (FORCE)").format(
            sql.SQL("IF EXISTS ") if missing_ok else sql.SQL(""), sql.Identifier(name)
        )
        with self.connect() as conn:
            conn.execute(query)

    # ----------------------------------------------------------------- lifecycle

    def server_options(self) -> list[str]:
        """Postmaster command-line options (passed through ``pg_ctl -o``)."""
        opts: dict[str, object] = {
            "listen_addresses": self.host,
            "port": self.port,
            "unix_socket_directories": str(self.socket_dir),
            "cluster_name": self.cluster_name,
            "max_connections": 300,
            "shared_buffers": "128MB",
        }
        if not self.durable:
            opts |= {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        opts |= self.settings
        args: list[str] = []
        for key, value in opts.items():
            if isinstance(value, bool):
                value = "on" if value else "off"
            args += ["-c", f"{key}={value}"]
        return args

    def _wrap(self, argv: Sequence[str]) -> list[str]:
        if not self._as_postgres:
            return list(argv)
        if self._runuser is None:
            runuser = shutil.which("runuser")
            if runuser is None:
                raise PostgresClusterError(
                    "running as root but `runuser` is not available to drop to the postgres user"
                )
            self._runuser = runuser
        return [self._runuser, "-u", _PG_USER, "--", *argv]

    def _run(
        self, argv: Sequence[str], *, check: bool = True, timeout: float = _SUBPROCESS_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        cmd = self._wrap(argv)
        try:
            proc = subprocess.run(
                cmd,
                # A cwd the postgres user can enter (root's cwd may not be).
                cwd=self._root or "/",
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
                timeout=timeout,
                env={**os.environ, "LC_ALL": "C", "LANG": "C"},
            )
        except subprocess.TimeoutExpired as exc:
            raise PostgresClusterError(f"{shlex.join(cmd)} timed out after {timeout}s") from exc
        if check and proc.returncode != 0:
            raise PostgresClusterError(
                f"{shlex.join(cmd)} exited with {proc.returncode}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
            )
        return proc

    def pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``pg_ctl -D <data_dir> *args`` (as the postgres user when root)."""
        return self._run(
            [str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), *args], check=check
        )

    def _pg_ctl_start_args(self, verb: str) -> list[str]:
        return [
            verb,
            "-w",
            "-t",
            str(_START_TIMEOUT),
            "-l",
            str(self.log_file),
            "-o",
            shlex.join(self.server_options()),
        ]

    def _reap_stale(self) -> None:
        cleanup_stale_clusters(self._base_dir)

    def _prepare(self) -> None:
        self._bin_dir = self.bin_dir  # resolve (maybe install) before creating anything

    def _launch(self) -> None:
        """initdb a fresh cluster in the directory and start it."""
        self.socket_dir.mkdir()
        self.log_file.touch()
        if self._as_postgres:
            for path in (self.root, self.socket_dir, self.log_file):
                shutil.chown(path, user=_PG_USER, group=None)
        self._make_data_dir()
        self._start_server()

    def _make_data_dir(self) -> None:
        """A fresh ``initdb`` in :attr:`data_dir`."""
        self._run(
            [
                str(self.bin_dir / "initdb"),
                "-D",
                str(self.data_dir),
                "-A",
                "trust",
                "-U",
                _PG_USER,
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
                "--no-instructions",
            ]
        )

    def _start_server(self) -> None:
        """pg_ctl start on a free port, retrying when the port got taken meanwhile."""
        last_error = ""
        for _attempt in range(_PORT_ATTEMPTS):
            self._port = free_port(self.host)
            log_offset = self.log_file.stat().st_size
            proc = self.pg_ctl(*self._pg_ctl_start_args("start"), check=False)
            if proc.returncode == 0:
                return
            log = tail(self.log_file, offset=log_offset)
            last_error = (
                f"pg_ctl start exited with {proc.returncode}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\n"
                f"server log ({self.log_file}):\n{log}"
            )
            # pg_ctl -w may give up while a postmaster is still around; make sure not.
            pid = _read_postmaster_pid(self.data_dir)
            if pid is not None:
                _kill_postmaster(pid, self.data_dir)
            if "could not bind" not in log and "could not create any TCP/IP" not in log:
                break
        raise PostgresClusterError(f"PostgreSQL failed to start.\n{last_error}")

    def restart(self, mode: ShutdownMode = "fast") -> None:
        """``pg_ctl restart`` with the same options (drops all client connections)."""
        log_offset = self.log_file.stat().st_size
        proc = self.pg_ctl(*self._pg_ctl_start_args("restart"), "-m", mode, check=False)
        if proc.returncode != 0:
            raise PostgresClusterError(
                f"pg_ctl restart exited with {proc.returncode}\n"
                f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}\n"
                f"server log:\n{tail(self.log_file, offset=log_offset)}"
            )

    def halt(self) -> None:
        """Stop the server, keeping the cluster and its port for ``resume``."""
        self.pg_ctl("stop", "-w", "-m", "fast")

    def resume(self) -> None:
        """Start a halted server again, on the same port."""
        self.pg_ctl(*self._pg_ctl_start_args("start"))

    def postmaster_pid(self) -> int | None:
        return _read_postmaster_pid(self.data_dir) if self._root is not None else None

    def _shut_down(self) -> None:
        """Stop the server (immediate mode), killing it if ``pg_ctl`` cannot."""
        pid = _read_postmaster_pid(self.data_dir)
        if pid is None:
            return
        proc = self._run(
            [
                str(self.bin_dir / "pg_ctl"),
                "-D",
                str(self.data_dir),
                "stop",
                "-w",
                "-m",
                "immediate",
            ],
            check=False,
            timeout=60,
        )
        if proc.returncode != 0:
            _kill_postmaster(pid, self.data_dir)


if __name__ == "__main__":  # pragma: no cover - manual smoke test
    with PostgresCluster() as _pg:
        print(_pg, _pg.url(), file=sys.stderr)
