"""One apt-get at a time among the test processes: installing a database server the
machine lacks (``_postgres``, ``_mariadb``) takes dpkg's lock, and the test workers of a
fresh machine all want theirs at once. Plain module, like the servers' own."""

from __future__ import annotations

import fcntl
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

__all__ = ["apt_install", "apt_lock", "installed_as_root"]

_LOCK = Path(tempfile.gettempdir()) / "sqla-scheduler-apt.lock"


@contextmanager
def apt_lock() -> Iterator[None]:
    """Hold the lock the test processes take around their apt-get runs. Look again for
    what to install once it is held: the process before may have installed it."""
    with _LOCK.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def apt_install(
    apt_get: str,
    package: str,
    *,
    installed: Callable[[], bool],
    hint: str,
    error: Callable[[str], Exception] = RuntimeError,
    prefix: Sequence[str] = (),
) -> None:
    """``apt-get update`` then ``install -y --no-install-recommends package`` (behind
    ``prefix``: sudo), under ``apt_lock``, unless ``installed()`` once the lock is held.
    A failed command raises ``error`` with the command, the tail of its output and
    ``hint``."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    wait = ["-o", "DPkg::Lock::Timeout=600"]  # an apt-get of something else, say
    with apt_lock():
        if installed():
            return  # the process before us installed it
        for cmd in (
            [*prefix, apt_get, *wait, "update"],
            [*prefix, apt_get, *wait, "install", "-y", "--no-install-recommends", package],
        ):
            proc = subprocess.run(
                cmd,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
            if proc.returncode != 0:
                tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
                raise error(f"{shlex.join(cmd)} exited with {proc.returncode}.\n{tail}\n{hint}")


def installed_as_root(
    package: str,
    find: Callable[[], Path | None],
    *,
    what: str,
    hint: str,
    error: Callable[[str], Exception],
) -> Path:
    """What ``find`` finds (``what``: the program), installing the apt ``package`` first
    when it finds nothing. Installing takes root and ``apt-get``; without them ``error``
    says what to install (``hint``)."""
    found = find()
    if found is not None:
        return found
    apt_get = shutil.which("apt-get")
    if os.geteuid() != 0 or apt_get is None:
        raise error(
            f"{what} not found, and it cannot be installed here (it takes root and apt-get). {hint}"
        )
    apt_install(apt_get, package, installed=lambda: find() is not None, hint=hint, error=error)
    found = find()
    if found is None:
        raise error(f"{package} was installed but {what} is not found. {hint}")
    return found
