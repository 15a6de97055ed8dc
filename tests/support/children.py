"""A Python child that starts throwaway servers and then ends as a test says (exits,
is sent a signal, is killed), for the tests of what stops or reaps what it left."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.servers.base import proc_state

__all__ = ["gone", "run_child"]

_ROOT = Path(__file__).resolve().parents[2]


def run_child(start: str, body: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run ``start`` (which starts the servers and prints, on one line, what the test
    needs of them) then ``body`` in a Python child with this checkout first on its path;
    return how it ended and the words of that line. ``os``, ``signal`` and ``sys`` are
    imported for both."""
    code = (
        textwrap.dedent(
            f"""
            import os, signal, sys
            sys.path.insert(0, {str(_ROOT)!r})
            """
        )
        + textwrap.dedent(start)
        + textwrap.dedent(body)
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.stdout.strip(), proc.stderr
    return proc, proc.stdout.splitlines()[0].split()


def gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for its reaper."""
    state = proc_state(pid)
    return state is None or state[0] == "Z"
