"""A port taken under a server's feet, for the tests of the servers' retries."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

import pytest

__all__ = ["a_taken_port_first"]


@contextmanager
def a_taken_port_first(
    monkeypatch: pytest.MonkeyPatch, module: ModuleType
) -> Iterator[tuple[int, list[int]]]:
    """Have ``module.free_port`` offer a port another socket listens on first, then free
    ones; yields that port and the list of the ports offered, in order."""
    real_free_port = module.free_port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken: int = squatter.getsockname()[1]
        offered: list[int] = []

        def taken_first(host: str = "127.0.0.1") -> int:
            offered.append(real_free_port(host) if offered else taken)
            return offered[-1]

        monkeypatch.setattr(module, "free_port", taken_first)
        yield taken, offered
