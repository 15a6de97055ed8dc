"""What stops the suite's throwaway servers (``_postgres``, ``_mariadb``) when their process
ends without stopping them: an :mod:`atexit` hook, and a ``SIGTERM`` hook (``timeout``, a CI
cancellation), which skips ``atexit`` by default. One registry for every kind of server,
so one hook stops them all.

Plain module, like the servers' own.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from types import FrameType
from typing import Any, Protocol

__all__ = ["Server", "register", "unregister"]


class Server(Protocol):
    """A server the hooks can stop: the process that started it, and how."""

    _owner_pid: int

    def stop(self) -> None: ...


_live: set[Server] = set()
_lock = threading.RLock()  # re-entrant: the SIGTERM hook may run inside a server's start()
_hooks_installed = False
_previous_sigterm: Any = None


def register(server: Server) -> None:
    """Stop ``server`` when this process ends, unless ``unregister`` came first."""
    _install_hooks()
    with _lock:
        _live.add(server)


def unregister(server: Server) -> None:
    with _lock:
        _live.discard(server)


def _stop_all() -> None:
    with _lock:
        servers = list(_live)
    for server in servers:
        if server._owner_pid == os.getpid():  # never a parent's server from a forked child
            with contextlib.suppress(Exception):
                server.stop()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    _stop_all()
    previous = _previous_sigterm
    if callable(previous):
        # Another copy of this module (imported under a second name) hooked first.
        previous(signum, frame)
        return
    # Restore the default disposition and die by SIGTERM, as if we had never hooked it.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


_on_sigterm._pg_cluster_hook = True  # type: ignore[attr-defined]


def _install_hooks() -> None:
    global _hooks_installed, _previous_sigterm
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_stop_all)
    # Only hook SIGTERM when we can (main thread) and nobody else has a Python-level
    # handler installed but another copy of this one.
    if threading.current_thread() is not threading.main_thread():
        return
    current = signal.getsignal(signal.SIGTERM)
    if current in (signal.SIG_DFL, None) or getattr(current, "_pg_cluster_hook", False):
        _previous_sigterm = current
        signal.signal(signal.SIGTERM, _on_sigterm)
