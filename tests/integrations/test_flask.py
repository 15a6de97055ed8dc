"""sqla_scheduler.integrations.flask: the scheduler runs in the serving process only.

Real ``flask`` processes serve ``flask_served.py`` on a SQLite file: under ``flask run``
(with and without the reloader) exactly one scheduler starts, in the process that serves,
and runs what a request schedules; ``flask routes`` and ``flask shell`` start none; under
``gunicorn --preload`` each of two workers starts its own, under its own name. Every
process is started in a session of its own and its whole group is stopped at the end.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask import Flask
from sqlalchemy import create_engine, text

from sqla_scheduler import Scheduler, migrate, one_time
from sqla_scheduler.integrations.flask import EXTENSION_KEY, RUN_CONFIG_KEY, init_app
from tests.support.cli import ROOT, cli_env

APP = "tests.integrations.flask_served:create_app"
STARTED = re.compile(r"^pid=(\d+) sqla_scheduler: scheduler '.*' started", re.MULTILINE)
STOPPED = re.compile(r"^pid=(\d+) sqla_scheduler: scheduler '.*' stopped", re.MULTILINE)


@pytest.fixture
def database(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'served.db'}"
    migrate.upgrade(url)
    return url


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def node_pids(url: str) -> list[int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [row[0] for row in conn.execute(text("SELECT pid FROM scheduled_tasks_nodes"))]
    finally:
        engine.dispose()


def flask(*args: str, url: str, log: Path) -> subprocess.Popen[bytes]:
    """``flask --app APP ARGS`` in a new session (its own process group), output to ``log``."""
    return python_m("flask", "--app", APP, *args, url=url, log=log)


def python_m(module: str, *args: str, url: str, log: Path) -> subprocess.Popen[bytes]:
    """``python -m MODULE ARGS`` on ``url`` in a new session, output to ``log``.

    The child's SIGINT is Python's own (KeyboardInterrupt) even where this process runs
    with SIGINT ignored, as a shell's background job does: a child inherits an ignored
    signal, and a Flask server that ignores Ctrl-C would never stop.
    """
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _popen(module, *args, url=url, log=log)
    finally:
        signal.signal(signal.SIGINT, previous)


def _popen(module: str, *args: str, url: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=ROOT,
            env=cli_env(DATABASE_URL=url),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group (the reloader and its child); SIGKILL what lingers.

    The whole group is waited for, not only its leader: the reloader's child may outlive
    its parent.
    """
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        proc.wait(timeout=30)
        return
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        proc.poll()  # reap the leader, so that it no longer counts as a member
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def request(port: int, method: str, path: str) -> dict[str, int]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    with urllib.request.urlopen(req, timeout=10) as response:
        body: dict[str, int] = json.load(response)
        return body


def wait_until_serving(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll until the server accepts a connection (no request is sent: that starts it)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"flask run did not serve on {port}:\n{log.read_text()}")
            time.sleep(0.05)


def wait_or_dump(proc: subprocess.Popen[bytes], pid: int, log: Path) -> None:
    """Wait for ``proc`` to exit; if it hangs, fail with the stacks of ``pid``'s threads."""
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        status = Path(f"/proc/{pid}/status").read_text()
        signals = [line for line in status.splitlines() if line.startswith(("Sig", "Shd"))]
        os.kill(pid, signal.SIGUSR1)  # flask_served's faulthandler writes the stacks
        wait_for_line(r"^Thread 0x", log, proc)
        pytest.fail(f"pid {pid} did not exit within 30 s of SIGINT ({signals}):\n{log.read_text()}")


def wait_for_line(pattern: str, log: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 30
    while not re.search(pattern, log.read_text(), re.MULTILINE):
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"no line matching {pattern!r}:\n{log.read_text()}")
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("reload", ["--debug", "--no-debug"])
def test_flask_run_starts_one_scheduler_in_the_serving_process(
    database: str, tmp_path: Path, reload: str
) -> None:
    """Slow by nature: ``flask run`` in real processes (with ``--debug``, the reloader's
    parent and the child it serves from), first requests, then Ctrl-C."""
    port = free_port()
    log = tmp_path / "run.log"
    proc = flask("run", reload, "--port", str(port), url=database, log=log)
    try:
        wait_until_serving(port, proc, log)
        # serving, but no request yet: nothing started, in the parent or the child
        assert not STARTED.search(log.read_text()), log.read_text()
        assert node_pids(database) == []

        # concurrent first requests start one scheduler between them
        pids: list[int] = []
        threads = [
            threading.Thread(target=lambda: pids.append(request(port, "GET", "/pid")["pid"]))
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        server_pid = request(port, "POST", "/record/one")["pid"]
        assert set(pids) == {server_pid}
        if reload == "--debug":
            assert server_pid != proc.pid, "the reloader's child serves, not the parent"
        else:
            assert server_pid == proc.pid

        wait_for_line(rf"^pid={server_pid} flask_served: ran one$", log, proc)
        output = log.read_text()
        assert [int(pid) for pid in STARTED.findall(output)] == [server_pid], output
        assert node_pids(database) == [server_pid]

        # Ctrl-C in the serving process: it exits normally and atexit stops the loop (the
        # reloader's parent then exits with its child)
        os.kill(server_pid, signal.SIGINT)
        wait_or_dump(proc, server_pid, log)
    finally:
        stop_group(proc)
    output = log.read_text()
    assert [int(pid) for pid in STARTED.findall(output)] == [server_pid], output
    assert [int(pid) for pid in STOPPED.findall(output)] == [server_pid], output
    assert node_pids(database) == []  # a scheduler that stops removes its node


@pytest.mark.parametrize("command", ["routes", "shell"])
def test_other_flask_commands_start_no_scheduler(
    database: str, tmp_path: Path, command: str
) -> None:
    log = tmp_path / f"{command}.log"
    proc = flask(command, url=database, log=log)
    try:
        proc.wait(timeout=60)
    finally:
        stop_group(proc)
    output = log.read_text()
    assert proc.returncode == 0, output
    if command == "routes":
        assert "/record/<name>" in output
    assert not STARTED.search(output), output
    assert node_pids(database) == []


def serve_pid(port: int, served: set[int]) -> None:
    served.add(request(port, "GET", "/pid")["pid"])


def test_gunicorn_starts_one_scheduler_per_worker_and_none_in_the_master(
    database: str, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "gunicorn.log"
    master = python_m(
        "gunicorn",
        *("--workers", "2", "--preload", "--bind", f"127.0.0.1:{port}"),
        *("--graceful-timeout", "20", f"{APP}()"),
        url=database,
        log=log,
    )
    try:
        wait_until_serving(port, master, log)
        # --preload: the master built the application, and started nothing
        assert not STARTED.search(log.read_text()), log.read_text()
        assert node_pids(database) == []

        # concurrent requests until both workers have served one (each starts its own)
        served: set[int] = set()
        deadline = time.monotonic() + 30
        while len(served) < 2:
            assert time.monotonic() < deadline, f"served only by {served}:\n{log.read_text()}"
            batch = [threading.Thread(target=serve_pid, args=(port, served)) for _ in range(8)]
            for thread in batch:
                thread.start()
            for thread in batch:
                thread.join(timeout=30)
        assert master.pid not in served

        ran_by = request(port, "POST", "/record/order-1")["pid"]
        wait_for_line(r"^pid=\d+ flask_served: ran order-1$", log, master)
        output = log.read_text()
        assert sorted(int(pid) for pid in STARTED.findall(output)) == sorted(served), output
        assert ran_by in served
        assert sorted(node_pids(database)) == sorted(served)  # two nodes of the cluster

        os.kill(master.pid, signal.SIGTERM)  # gunicorn stops its workers, which exit normally
        master.wait(timeout=60)
    finally:
        stop_group(master)
    output = log.read_text()
    assert sorted(int(pid) for pid in STOPPED.findall(output)) == sorted(served), output
    assert node_pids(database) == []


# --- in this process ----------------------------------------------------------------------


@one_time("noop")
def noop(ctx: object) -> None: ...


@pytest.fixture
def scheduler(database: str) -> Iterator[Scheduler]:
    engine = create_engine(database)
    scheduler = Scheduler(engine, [noop])
    try:
        yield scheduler
    finally:
        scheduler.stop()
        engine.dispose()


def test_init_app_stores_the_scheduler_and_starts_it_with_the_first_request(
    scheduler: Scheduler,
) -> None:
    app = Flask(__name__)
    init_app(app, scheduler)
    init_app(app, scheduler)
    assert app.extensions[EXTENSION_KEY] is scheduler
    assert not scheduler.running
    assert app.test_client().get("/").status_code == 404  # a request, even one no view serves
    assert scheduler.running
    app.test_client().get("/")
    assert scheduler.running


def test_an_application_runs_one_scheduler(scheduler: Scheduler, database: str) -> None:
    app = Flask(__name__)
    init_app(app, scheduler)
    other = Scheduler(create_engine(database), [noop])
    with pytest.raises(RuntimeError, match="already runs"):
        init_app(app, other)
    assert app.extensions[EXTENSION_KEY] is scheduler


def test_a_scheduler_shared_by_two_applications_starts_once(scheduler: Scheduler) -> None:
    first, second = Flask("first"), Flask("second")
    init_app(first, scheduler)
    init_app(second, scheduler)
    first.test_client().get("/")
    second.test_client().get("/")  # Lifecycle.start would raise if it were called twice
    assert scheduler.running


def test_a_scheduler_the_application_started_is_left_alone(scheduler: Scheduler) -> None:
    app = Flask(__name__)
    init_app(app, scheduler)
    scheduler.start()
    app.test_client().get("/")
    assert scheduler.running


def test_requests_start_nothing_with_sqla_scheduler_run_false(scheduler: Scheduler) -> None:
    app = Flask(__name__)
    init_app(app, scheduler)
    app.config[RUN_CONFIG_KEY] = False
    app.test_client().get("/")
    assert not scheduler.running
    app.config[RUN_CONFIG_KEY] = True
    app.test_client().get("/")
    assert scheduler.running
