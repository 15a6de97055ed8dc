"""What every throwaway server of the suite shares: a temporary directory of its own with
an ``owner`` file naming the process that made it, a free port, the stop hooks of
``live``, and the reaping of directories whose owner died without stopping them.

Plain module, like the servers' own.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Final

from typing_extensions import Self

from tests.support.servers import live

__all__ = [
    "ChildServer",
    "ThrowawayServer",
    "free_port",
    "kill_by_pid_file",
    "kill_ours",
    "pid_alive",
    "proc_cmdline",
    "proc_start_time",
    "proc_state",
    "reap_stale",
    "tail",
]

OWNER_FILE: Final = "owner"
# A temp dir without an owner file is only considered abandoned after this long
# (it may belong to a run that is between mkdtemp() and writing the file).
_ORPHAN_GRACE_SECONDS: Final = 600.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _proc(pid: int, name: str) -> bytes | None:
    """``/proc/<pid>/<name>`` (Linux); ``None`` when there is no such process."""
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return None


def proc_state(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` from its third on (the state, ``Z`` for a zombie,
    first); ``None`` when there is no such process."""
    stat = _proc(pid, "stat")
    if stat is None:
        return None
    # Field 2 (comm) may contain spaces/parens; fields after the last ')' are fixed.
    return stat[stat.rfind(b")") + 2 :].decode().split()


def proc_start_time(pid: int) -> str | None:
    """Kernel start time of ``pid`` (Linux), to tell a live owner from a reused pid."""
    fields = proc_state(pid) or []
    return fields[19] if len(fields) > 19 else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def proc_cmdline(pid: int) -> str | None:
    raw = _proc(pid, "cmdline")
    return None if raw is None else raw.replace(b"\0", b" ").decode(errors="replace")


def tail(path: Path, lines: int = 40, offset: int = 0) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError as exc:
        return f"<could not read {path}: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


def kill_ours(pid: int, root: Path) -> None:
    """SIGKILL a server of ours (its directory ``root`` in argv), and wait until it is gone."""
    cmdline = proc_cmdline(pid)
    if cmdline is None or str(root) not in cmdline:
        return  # gone, or the pid was reused by something else
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and pid_alive(pid) and proc_cmdline(pid):
        time.sleep(0.05)


def kill_by_pid_file(pid_file: str) -> Callable[[Path], None]:
    """A killer for ``reap_stale``: of the server whose pid is in the directory's
    ``pid_file``, if its argv names the directory."""

    def kill(root: Path) -> None:
        try:
            pid = int((root / pid_file).read_text().strip())
        except (OSError, ValueError):
            return
        kill_ours(pid, root)

    return kill


def reap_stale(
    prefix: str, base_dir: str | os.PathLike[str] | None, kill: Callable[[Path], None]
) -> list[Path]:
    """Kill (``kill`` of the directory) and delete the servers left behind by runs that
    died without cleaning up.

    A directory named with ``prefix`` is stale when the process that created it (recorded
    in its ``owner`` file) no longer exists. Directories of live runs (e.g. concurrent
    pytest sessions) are left alone. Returns the directories removed.
    """
    base = Path(base_dir) if base_dir is not None else Path(tempfile.gettempdir())
    removed: list[Path] = []
    for root in base.glob(f"{prefix}*"):
        if not root.is_dir() or root.is_symlink():
            continue
        try:
            pid_s, _, start_s = (root / OWNER_FILE).read_text().strip().partition(" ")
            owner = int(pid_s)
        except (OSError, ValueError):
            try:
                age = time.time() - root.stat().st_mtime
            except OSError:
                continue
            if age < _ORPHAN_GRACE_SECONDS:
                continue
        else:
            if pid_alive(owner) and proc_start_time(owner) in (start_s, None):
                continue
        kill(root)
        shutil.rmtree(root, ignore_errors=True)
        removed.append(root)
    return removed


class ThrowawayServer(ABC):
    """A server in a temporary directory of its own, on a free port of ``host``.

    :meth:`start` reaps what killed runs left behind, makes the directory, records its
    owner and registers the server with ``live``'s stop hooks before the subclass's
    ``_launch`` starts the process; :meth:`stop` has the subclass's ``_shut_down`` end
    it, then deletes the directory. A server is a context manager: ``with`` starts and
    stops it.
    """

    host: Final = "127.0.0.1"
    #: The prefix of its directories, which the next start reaps when their owner is gone.
    dir_prefix: ClassVar[str]
    #: What the errors call it ("cluster", "server", "bouncer"), and their type.
    noun: ClassVar[str]
    error: ClassVar[type[Exception]]

    def __init__(self, base_dir: str | os.PathLike[str] | None) -> None:
        self._base_dir = Path(base_dir) if base_dir is not None else None
        self._root: Path | None = None
        self._port: int | None = None
        self._owner_pid = os.getpid()

    @property
    def running(self) -> bool:
        return self._root is not None and self._port is not None

    @property
    def port(self) -> int:
        if self._port is None:
            raise self.error(f"{self.noun} is not started")
        return self._port

    @property
    def root(self) -> Path:
        """The temporary directory: the server's files, its log among them."""
        if self._root is None:
            raise self.error(f"{self.noun} is not started")
        return self._root

    def start(self) -> Self:
        """Make a new temporary directory and start the server in it. Returns self."""
        if self._root is not None:
            raise self.error(f"{self.noun} already started")
        with contextlib.suppress(Exception):
            self._reap_stale()
        self._prepare()
        self._owner_pid = os.getpid()
        self._root = root = Path(tempfile.mkdtemp(prefix=self.dir_prefix, dir=self._base_dir))
        live.register(self)
        try:
            (root / OWNER_FILE).write_text(f"{os.getpid()} {proc_start_time(os.getpid()) or ''}\n")
            self._launch()
        except BaseException:
            self._port = None
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server and delete its directory. Idempotent."""
        root = self._root
        if root is None:
            return
        try:
            self._shut_down()
        finally:
            shutil.rmtree(root, ignore_errors=True)
            self._root = self._port = None
            live.unregister(self)

    @abstractmethod
    def _reap_stale(self) -> None:
        """Kill and delete the servers of this kind that killed runs left behind."""

    @abstractmethod
    def _prepare(self) -> None:
        """Make sure of what must be there before the directory is made (the binaries)."""

    @abstractmethod
    def _launch(self) -> None:
        """Start the server in :attr:`root`, its owner file written."""

    @abstractmethod
    def _shut_down(self) -> None:
        """End the server's process, if it has one."""

    def __enter__(self) -> Self:
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
        return f"<{type(self).__name__} {state}>"


class ChildServer(ThrowawayServer):
    """A throwaway server that is a child process of this one, run as ``as_user`` when
    this process is root (Popen(user=) rather than runuser: the child keeps this
    process's limits on open files, which runuser's PAM session cuts to 1024)."""

    #: How long the server has to end at SIGTERM before it is killed.
    stop_timeout: ClassVar[float]

    def __init__(self, base_dir: str | os.PathLike[str] | None, *, as_user: str) -> None:
        super().__init__(base_dir)
        self._process: subprocess.Popen[bytes] | None = None
        self._as_user = as_user if os.geteuid() == 0 else None

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs."""
        return self._process.pid if self._process is not None else None

    def _own_root(self) -> None:
        """Give the directory to the server's user, when it runs as another."""
        if self._as_user is not None:
            shutil.chown(self.root, user=self._as_user, group=self._as_user)

    def _user_args(self) -> dict[str, Any]:
        """Popen's arguments that run the server as its user."""
        if self._as_user is None:
            return {}
        return {"user": self._as_user, "group": self._as_user, "extra_groups": []}

    def _shut_down(self) -> None:
        self._terminate()

    def _terminate(self) -> None:
        """SIGTERM the server, SIGKILL it after :attr:`stop_timeout`."""
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
