"""``sqla-scheduler worker --collect-metrics``: the worker keeps the table's gauges current
for ``/metrics`` (they stayed empty under the worker unless the application ran a
collector of its own; issue 46, item 8), counting the whole table, without counting
itself; an application without ``SchedulerMetrics`` is told so before the worker starts."""

from __future__ import annotations

import re
import signal
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import create_engine

from sqla_scheduler import Scheduler, configure_sqlite, one_time
from tests.support import sqlite_file_url
from tests.support.cli import cli_env, one_error_line, run, start
from tests.support.servers.base import free_port
from tests.support.workers import wait_until


def _gauge(port: int, name: str) -> float | None:
    """The value of ``name`` on the worker's /metrics, ``None`` when it has none yet."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            body = reply.read().decode()
    except OSError:
        return None
    found = re.search(rf"^{name} (\S+)$", body, re.MULTILINE)
    return None if found is None else float(found.group(1))


def test_the_worker_keeps_the_gauges_current(sqlite_template: Path, tmp_path: Path) -> None:
    url = sqlite_file_url(sqlite_template, tmp_path)
    engine = configure_sqlite(create_engine(url))
    later = datetime.now(timezone.utc) + timedelta(days=1)
    client = Scheduler(engine)
    report = one_time("report")(lambda ctx: None)
    client.schedule_batch(engine, [report.instance(f"r{i}", at=later) for i in range(3)])
    port = free_port()
    worker = start(
        "worker",
        "tests.cli.metrics_app:scheduler",
        "--health-port",
        str(port),
        "--collect-metrics",
        "200ms",
        env=cli_env(DATABASE_URL=url),
    )
    try:
        wait_until(lambda: _gauge(port, "sqla_scheduler_scheduled_executions") == 3, 30, "3")
        assert _gauge(port, "sqla_scheduler_running_executions") == 0
        client.schedule_batch(engine, [report.instance(f"s{i}", at=later) for i in range(2)])
        wait_until(lambda: _gauge(port, "sqla_scheduler_scheduled_executions") == 5, 30, "5")
    finally:
        worker.send_signal(signal.SIGTERM)
        _out, err = worker.communicate(timeout=60)
        engine.dispose()
    assert worker.returncode == 0, err


def test_collecting_needs_scheduler_metrics(sqlite_template: Path, tmp_path: Path) -> None:
    env = cli_env(DATABASE_URL=sqlite_file_url(sqlite_template, tmp_path))
    done = run("worker", "tests.cli.app:scheduler", "--collect-metrics", "15s", env=env)
    assert done.returncode == 2
    assert one_error_line(done.stderr).startswith(
        "sqla-scheduler: --collect-metrics: collecting the gauges needs a SchedulerMetrics "
        "among the scheduler's interceptors"
    )
    done = run("worker", "tests.cli.app:scheduler", "--collect-metrics", "0s", env=env)
    assert done.returncode == 2
    assert "'0s' is not a duration above 0 and at most 1d, e.g. 15s" in done.stderr
