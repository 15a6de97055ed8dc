"""``sqla-scheduler admin``: credentials from the environment, the page at /admin/jobs."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from sqla_scheduler.cli import _admin, cli
from tests.support.cli import cli_env, one_error_line, run, start

APP = "tests.cli.app:scheduler"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_admin_refuses_to_start_without_a_password(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    done = run("admin", APP, env=cli_env(DATABASE_URL=url))
    assert done.returncode == 2
    assert "ADMIN_PASSWORD" in one_error_line(done.stderr)


def test_admin_refuses_an_unknown_setting_in_the_environment(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    env = cli_env(DATABASE_URL=url, ADMIN_PASSWORD="s3cret", SQLA_SCHEDULER_POLL_INTERVAL="1s")
    done = run("admin", APP, env=env)
    assert done.returncode == 2
    error = one_error_line(done.stderr)
    assert "SQLA_SCHEDULER_POLL_INTERVAL" in error
    assert "SQLA_SCHEDULER_POLLING_INTERVAL" in error


def test_admin_names_the_extra_when_its_packages_are_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'app.db'}")
    monkeypatch.setattr(_admin, "_missing_admin_packages", lambda: ["starlette", "uvicorn"])
    result = CliRunner().invoke(cli, ["admin", APP])
    assert result.exit_code == 1
    assert result.stderr == (
        "sqla-scheduler: the admin page needs starlette, uvicorn: install sqla-scheduler[admin]\n"
    )


def wait_listening(server: subprocess.Popen[str], port: int, deadline: float = 30) -> None:
    """Until something accepts connections on ``port``; fail if the server exits first."""
    until = time.monotonic() + deadline
    while time.monotonic() < until:
        if server.poll() is not None:
            raise AssertionError(f"the server exited: {server.communicate()[1]}")
        with socket.socket() as probe:
            probe.settimeout(0.1)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)  # between polls; the deadline bounds the wait
    raise AssertionError(f"nothing listened on port {port} within {deadline}s")


def test_admin_serves_the_page_behind_basic_auth(pg_url: str) -> None:
    port = free_port()
    env = cli_env(DATABASE_URL=pg_url, ADMIN_USER="ops", ADMIN_PASSWORD="s3cret")
    server = start("admin", APP, "--port", str(port), env=env)
    try:
        wait_listening(server, port)
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(timeout=5) as client:
            assert client.get(f"{base}/admin/jobs/", auth=("ops", "s3cret")).status_code == 200
            assert client.get(f"{base}/admin/jobs/").status_code == 401
            assert client.get(f"{base}/admin/jobs/", auth=("ops", "wrong")).status_code == 401
            assert client.post(f"{base}/admin/jobs/", auth=("ops", "s3cret")).status_code == 405
            moved = client.get(f"{base}/", auth=("ops", "s3cret"))
            assert moved.status_code in (302, 307)
            assert moved.headers["location"].endswith("/admin/jobs/")
    finally:
        server.terminate()
        server.communicate(timeout=30)


def test_admin_judges_nodes_by_the_interval_in_the_environment(pg_url: str) -> None:
    port = free_port()
    env = cli_env(
        DATABASE_URL=pg_url, ADMIN_PASSWORD="s3cret", SQLA_SCHEDULER_NODE_HEARTBEAT_INTERVAL="10m"
    )
    server = start("admin", APP, "--port", str(port), env=env)
    try:
        wait_listening(server, port)
        with httpx.Client(timeout=5) as client:
            summary = client.get(
                f"http://127.0.0.1:{port}/admin/jobs/api/summary", auth=("admin", "s3cret")
            )
        assert summary.status_code == 200, summary.text
        assert summary.json()["nodes"]["stale_after_seconds"] == 3 * 600
    finally:
        server.terminate()
        server.communicate(timeout=30)
