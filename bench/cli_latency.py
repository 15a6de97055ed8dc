"""Commit-to-start latency through the command line's worker (issue 35).

- ``cli_latency``: ``python -m sqla_scheduler worker app:scheduler`` runs a sync ``def``
  handler that writes one row (its start time) with a sync ``Engine``, in the default
  configuration (10 s polling: the NOTIFY wakes it); this process, on a sync ``Engine``,
  commits one execution every 30 ms (``GAP``), ``latency_runs`` of them. Timed
  from the moment ``schedule`` is called (so the client's commit is inside the figure)
  to the handler's start; ``cli_latency_after_commit`` from ``schedule``'s return. Both
  clocks are this machine's. PostgreSQL target: p50 <= 2.5 ms.

Bisecting the latency of this path from fed8135 to 090d14d (435 commits) (on this scenario, run as a
script against each revision's checkout) found one step: 45e4007, the pick that reads
the due index one range per task and priority, took the after-commit p50 from 1.12 to
1.55 ms (4 runs each, alternated); later revisions brought it back to about 1.2 ms.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from bench.harness import Bench
from bench.results import Figure, ScenarioError
from bench.scenarios import _percentiles
from bench.workers import ROOT
from sqla_scheduler import Scheduler, one_time

#: Seconds between two commits, as in the issue's measurement.
GAP = 0.030

APP = """
import time

from sqlalchemy import create_engine, text

from sqla_scheduler import Scheduler, one_time

engine = create_engine({url!r})
rows = create_engine({url!r})


@one_time("probe")
def probe(ctx) -> None:
    started = time.time()
    with rows.begin() as conn:
        conn.execute(
            text("insert into bench_starts values (:key, :at)"),
            {{"key": ctx.instance_id, "at": started}},
        )


scheduler = Scheduler(engine, [probe])
"""


def cli_latency(bench: Bench) -> list[Figure]:
    n, gap = bench.counts.latency_runs, GAP
    db = bench.new_db("cli_latency")
    url = bench.url(db)
    engine = bench.engine(db)
    with engine.begin() as conn:
        conn.execute(text("create table bench_starts (key text primary key, at float)"))
    app = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    (app / "latapp.py").write_text(APP.format(url=url))
    path = os.pathsep.join(filter(None, [str(ROOT), str(app), os.environ.get("PYTHONPATH")]))
    worker = subprocess.Popen(
        [sys.executable, "-m", "sqla_scheduler", "worker", "latapp:scheduler"],
        cwd=app,
        env={**os.environ, "PYTHONPATH": path},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    probe = one_time("probe")(lambda ctx: None)
    client = Scheduler(engine, [probe])

    def starts() -> dict[str, float]:
        with engine.connect() as conn:
            rows = conn.execute(text("select key, at from bench_starts")).tuples()
            return {key: float(at) for key, at in rows}

    calls: dict[str, float] = {}
    commits: dict[str, float] = {}
    try:
        client.schedule(engine, probe.instance("warm"))
        deadline = time.monotonic() + 60
        while "warm" not in starts():
            if worker.poll() is not None or time.monotonic() > deadline:
                raise ScenarioError("the CLI worker did not start the first execution")
            time.sleep(0.05)
        time.sleep(0.5)
        for i in range(n):
            key = f"c{i:05d}"
            calls[key] = time.time()
            client.schedule(engine, probe.instance(key))
            commits[key] = time.time()
            time.sleep(gap)
        deadline = time.monotonic() + 30
        while len(found := starts()) < n + 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.terminate()
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
        engine.dispose()
    if len(found) < n + 1:
        raise ScenarioError(f"cli_latency: {len(found) - 1} of {n} executions started")
    whole = sorted((found[k] - at) * 1000.0 for k, at in calls.items())
    after = sorted((found[k] - at) * 1000.0 for k, at in commits.items())
    targets = {50: 2.5} if bench.server.name == "postgresql" else {}
    label = "commit-to-start, CLI worker, sync handler"
    return [
        *_percentiles(bench, "cli_latency", label, whole, targets),
        *_percentiles(bench, "cli_latency_after_commit", f"{label}, from commit", after, {}),
    ]
