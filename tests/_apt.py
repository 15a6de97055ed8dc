"""One apt-get at a time among the test processes: installing a database server the
machine lacks (``_postgres``, ``_mariadb``) takes dpkg's lock, and the test workers of a
fresh machine all want theirs at once. Plain module, like the servers' own."""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["apt_lock"]

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
