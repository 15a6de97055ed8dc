"""Plain HTTP GETs on the loopback interface, for the tests of the probe servers."""

from __future__ import annotations

import urllib.error
import urllib.request

__all__ = ["get"]


def get(port: int, path: str, *, timeout: float = 10) -> tuple[int, str]:
    """The status and the body of a GET of ``path`` on ``127.0.0.1:port``, an error status
    as well as a success; a connection refused or timed out raises ``OSError``."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
