"""``sqla-scheduler demo``: it runs, tells its story, and keeps the scheduler's promises."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from tests.support.cli import INVOCATIONS, ROOT, cli_env, run, run_from_root, start

SUMMARY = re.compile(
    r"Summary after [\d.]+s: (?P<orders>\d+) orders? placed, (?P<rolled>.*?); "
    r"(?P<sent>\d+) confirmations? sent, \d+ still pending; \d+ cart sweeps?; "
    r"\d+ shipment polls?, \d+ parcels? delivered; charges: (?P<charged>\d+) succeeded, "
    r"(?P<retries>\d+) retr(?:y|ies), (?P<abandoned>\d+) abandoned; (?P<dead>.*?)\.\n"
)


def check_story(out: str) -> re.Match[str]:
    """The summary and the events agree with what the demo is meant to show."""
    summary = SUMMARY.search(out)
    assert summary, out
    assert int(summary["sent"]) >= 1, out
    assert int(summary["retries"]) >= 1, out
    assert int(summary["abandoned"]) >= 1, out
    assert re.match(
        r"\d+ dead letters? \(orders? #\d+(, #\d+)*: card declined after 3 attempts\)",
        summary["dead"],
    )
    rolled = re.fullmatch(
        r"(\d+) of them rolled back \(#([\d, #]+)\), whose confirmations? (?:was|were) never sent",
        summary["rolled"],
    )
    assert rolled, summary["rolled"]
    for number in re.findall(r"\d+", rolled[2]):
        # Its transaction rolled back, and its tasks with it: they never ran.
        assert f"order-{number}: order rolled back (out of stock)" in out
        assert not re.search(rf"(send-confirmation|charge-card) order-{number}:", out), out
    return summary


@pytest.mark.slow
def test_demo_on_sqlite(tmp_path: Path) -> None:
    """Slow by nature: the demo runs for its six seconds, long enough for its story (retries
    with backoff, a recurring sweep, a self-rescheduling poll) to play out."""
    # TMPDIR: the demo's SQLite file goes into this test's directory.
    done = run("demo", "--duration", "6", env=cli_env(TMPDIR=str(tmp_path)), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    out = done.stdout
    where = re.search(r"^database: (sqlite:///(\S+))$", out, re.MULTILINE)
    assert where, out
    assert Path(where[2]).parent.parent == tmp_path
    assert re.search(
        r"^tuned for a short demo: concurrency 4 \(default 10\), polling_interval 200ms "
        r"\(default 10s\), .*shutdown_max_wait 3s \(default 30m\)$",
        out,
        re.MULTILINE,
    ), out
    summary = check_story(out)
    assert "charged after 2 retries" in out  # a flaky charge that eventually went through
    assert re.search(r"sweep-carts recurring: idle carts swept", out)
    assert re.search(r"poll-shipment order-\d+: parcel in transit", out)
    # Plain lines when stdout is not a terminal: no escape codes, no live redraws.
    assert "\x1b[" not in out
    assert re.search(r"^\[\s*\d+\.\ds\] due \d+ · running \d+ · failing \d+", out, re.MULTILINE)

    engine = create_engine(where[1])
    try:
        with engine.connect() as conn:
            orders = conn.scalar(text("select count(*) from demo_orders"))
            dead = conn.execute(text("select order_id, reason from demo_dead_letters")).all()
            leftovers = conn.scalar(
                text("select count(*) from scheduled_tasks where task_instance = 'order-5'")
            )
    finally:
        engine.dispose()
    assert orders == int(summary["orders"]) - 1  # order 5 rolled back
    assert dead == [(1, "card declined after 3 attempts")]
    assert leftovers == 0

    # The command the summary gives lists the dead letter's abandoned execution (this
    # process ran it as `python -m sqla_scheduler`, and the hint says so: see below).
    command = re.search(r"`\S+ -m sqla_scheduler (history --url \S+ --outcome abandoned)`\.$", out)
    assert command, out
    assert command[1].split()[2] == where[1]
    listed = run(*command[1].split(), "--json")
    assert listed.returncode == 0, listed.stderr
    entries = json.loads(listed.stdout)
    assert [(e["task_name"], e["instance_id"], e["attempt"]) for e in entries] == [
        ("charge-card", "order-1", 3)
    ]
    assert "card declined" in entries[0]["error"]


@pytest.mark.slow
@pytest.mark.parametrize("database", ["pg_url", "mariadb_url"], ids=["postgresql", "mariadb"])
def test_demo_on_a_database_server(database: str, request: pytest.FixtureRequest) -> None:
    """Slow by nature: the demo runs for its five seconds on PostgreSQL, then on MariaDB."""
    url = str(request.getfixturevalue(database))
    done = run("demo", "--database-url", url, "--duration", "5", timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert f"database: {url}" in done.stdout
    check_story(done.stdout)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_demo_stops_on_a_signal_with_its_summary(tmp_path: Path, signum: signal.Signals) -> None:
    proc = start("demo", env=cli_env(TMPDIR=str(tmp_path)))
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 30
        seen = ""
        while "send-confirmation order-1: confirmation sent" not in seen:
            assert time.monotonic() < deadline, seen
            seen += proc.stdout.readline()
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert err == ""
    assert re.search(r"Summary after [\d.]+s: \d+ orders? placed", seen + out), seen + out


def test_the_summary_names_a_command_that_runs_from_the_checkout(tmp_path: Path) -> None:
    """``make demo`` runs the console script by its path (``.venv/bin/sqla-scheduler``),
    which a shell outside the venv does not find by name: the command the summary names
    must run as given, from the checkout, with that shell's ``PATH``."""
    script = INVOCATIONS["console-script"][0]
    env = cli_env(TMPDIR=str(tmp_path), PATH=os.defpath)  # the venv's bin is not on it
    assert not any(Path(d, "sqla-scheduler").exists() for d in os.defpath.split(os.pathsep))
    done = run("demo", "--duration", "1", invocation="console-script", env=env)
    assert done.returncode == 0, done.stderr
    hint = re.search(r"see what is left in it with `(.+) executions --url (\S+)`", done.stdout)
    assert hint, done.stdout
    command = shlex.split(hint[1])
    assert command == [os.path.relpath(script, ROOT) if script.startswith(f"{ROOT}/") else script]
    listed = run_from_root([*command, "executions", "--url", hint[2]], env=env)
    assert listed.returncode == 0, listed.stderr
    assert "send-confirmation" in listed.stdout or "sweep-carts" in listed.stdout, listed.stdout


def _admin_line(proc: subprocess.Popen[str]) -> tuple[re.Match[str], str]:
    """The line the demo prints about its admin page, and what it printed up to it."""
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    seen = ""
    while True:
        assert time.monotonic() < deadline, seen
        line = proc.stdout.readline()
        assert line, seen + (proc.stderr.read() if proc.stderr else "")
        seen += line
        found = re.fullmatch(
            r"admin page: (http://127\.0\.0\.1:(\d+)/) \(user (\S+), (.+)\)\n", line
        )
        if found:
            return found, seen


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return out, err


@pytest.mark.parametrize(
    "from_env",
    [False, pytest.param(True, marks=pytest.mark.slow)],
    ids=["random-password", "ADMIN_PASSWORD"],
)
def test_the_demo_serves_its_admin_page(tmp_path: Path, from_env: bool) -> None:
    """Slow by nature, the ADMIN_PASSWORD case: a second demo, started, signed in to and
    stopped (a graceful stop waits for the charges it is running)."""
    secret = "demo's own password"
    extra = {"ADMIN_PASSWORD": secret, "ADMIN_USER": "ops"} if from_env else {}
    proc = start("demo", "--admin-port", "0", env=cli_env(TMPDIR=str(tmp_path), **extra))
    try:
        found, seen = _admin_line(proc)
        url, port, user, said = found.groups()
        assert int(port) > 0  # 0 asked for a free port: the one it got is printed
        if from_env:
            assert (user, said) == ("ops", "the password in ADMIN_PASSWORD")
            assert secret not in seen
            password = secret
        else:
            assert user == "admin"
            password = said.removeprefix("password ")
            assert len(password) >= 16, said
        with httpx.Client(timeout=10) as client:
            assert client.get(url).status_code == 401
            assert client.get(url, auth=(user, "wrong")).status_code == 401
            page = client.get(url, auth=(user, password))
            assert page.status_code == 200, page.text
            # The demo's own tasks, with the buttons (actions on).
            for task in ("send-confirmation", "charge-card", "sweep-carts", "poll-shipment"):
                assert task in page.text, task
            assert 'data-action="pause"' in page.text
    finally:
        out, err = _stop(proc)
    assert proc.returncode == 0, err
    assert err == ""
    assert re.search(r"Summary after [\d.]+s: \d+ orders? placed", out), out


def test_the_demo_refuses_a_port_it_cannot_listen_on(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run("demo", "--admin-port", str(port), env=cli_env(TMPDIR=str(tmp_path)))
    assert done.returncode == 1
    assert f"--admin-port {port}: cannot listen on 127.0.0.1:{port}" in done.stderr
    bad = run("demo", "--admin-port", "70000")
    assert bad.returncode == 2
    assert "--admin-port" in bad.stderr
