"""``sqla-scheduler worker``: loading the app, graceful stops, errors, trio."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import sniffio
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.ext.asyncio import create_async_engine

from sqla_scheduler import Scheduler, one_time
from sqla_scheduler.worker import FORCED_STOP_WITHIN, WorkerError, load_scheduler, run_worker
from tests.concurrency.app import build_scheduler, engine_of, one_time_task
from tests.support import wait_for
from tests.support.servers.postgres import PostgresCluster
from tests.support.workers import ROOT, Worker, Workers, rows, scalar, wait_until, worker_command

# --- load_scheduler ---------------------------------------------------------------------


@pytest.fixture
def fake_app(monkeypatch: pytest.MonkeyPatch) -> Iterator[types.ModuleType]:
    """A module ``fake_worker_app`` with a scheduler in various guises."""
    engine = create_engine("sqlite://")
    scheduler = Scheduler(engine, [one_time("t")(lambda ctx: None)])
    module = types.ModuleType("fake_worker_app")
    module.scheduler = scheduler  # type: ignore[attr-defined]
    module.app = types.SimpleNamespace(jobs=types.SimpleNamespace(scheduler=scheduler))  # type: ignore[attr-defined]
    module.make = lambda: scheduler  # type: ignore[attr-defined]
    module.make_wrong = lambda: 42  # type: ignore[attr-defined]
    module.number = 7  # type: ignore[attr-defined]
    module.Scheduler = Scheduler  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_worker_app", module)
    try:
        yield module
    finally:
        engine.dispose()


def test_load_scheduler_finds_attributes_and_factories(fake_app: Any) -> None:
    assert load_scheduler("fake_worker_app:scheduler") is fake_app.scheduler
    assert load_scheduler("fake_worker_app:app.jobs.scheduler") is fake_app.scheduler
    assert load_scheduler("fake_worker_app:make") is fake_app.scheduler


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("fake_worker_app", r"expected MODULE:ATTR .*got 'fake_worker_app'"),
        ("fake_worker_app:", "expected MODULE:ATTR"),
        (":scheduler", "expected MODULE:ATTR"),
        ("no_such_module_xyz:scheduler", r"cannot import module 'no_such_module_xyz': No module"),
        ("fake_worker_app:nope", r"'fake_worker_app' has no attribute 'nope'"),
        ("fake_worker_app:app.jobs.nope", r"'fake_worker_app:app.jobs' has no attribute 'nope'"),
        ("fake_worker_app:number", r"'fake_worker_app:number' is not a Scheduler \(got int\)"),
        ("fake_worker_app:Scheduler", r"not a Scheduler \(got the class Scheduler\)"),
        ("fake_worker_app:make_wrong", "a factory that returned int, not a Scheduler"),
    ],
)
def test_load_scheduler_explains_what_is_wrong(fake_app: Any, spec: str, message: str) -> None:
    with pytest.raises(WorkerError, match=message):
        load_scheduler(spec)


# --- the command ----------------------------------------------------------------------------


def _cli(*args: str, url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        worker_command(*args),
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_worker_cli_errors(pg_cluster: PostgresCluster) -> None:
    """Bad usage exits 2, a database it cannot use exits 1; one line each, no traceback."""
    unreachable = "postgresql+psycopg://postgres@127.0.0.1:1/nowhere"
    no_table = pg_cluster.url("postgres")  # reachable, but never migrated
    cases = [
        (("nocolon",), unreachable, 2, "expected MODULE:ATTR"),
        (("tests.concurrency.nope:x",), unreachable, 2, "'tests.concurrency.nope'"),
        (("tests.concurrency.app:missing",), unreachable, 2, "no attribute 'missing'"),
        (("tests.concurrency.app:metadata",), unreachable, 2, "is not a Scheduler (got MetaData)"),
        (
            ("tests.concurrency.app:async_scheduler_from_env", "--backend", "trio"),
            unreachable,
            2,
            "--backend trio needs a Scheduler with a sync Engine",
        ),
        (("tests.concurrency.app:scheduler",), unreachable, 1, "cannot reach the database"),
        (("tests.concurrency.app:scheduler",), no_table, 1, "'scheduled_tasks' does not exist"),
        (("tests.concurrency.app:scheduler", "--concurrency", "0"), unreachable, 2, "0"),
    ]
    # Started together: each pays the interpreter's start-up, not one after the other.
    procs = [(args, _cli(*args, url=url), code, text) for args, url, code, text in cases]
    try:
        for args, proc, code, text in procs:
            _out, err = proc.communicate(timeout=60)
            assert proc.returncode == code, (args, err)
            assert text in err, (args, err)
            assert "Traceback" not in err, (args, err)
            if code == 1 or args[0] != "tests.concurrency.app:scheduler":
                # Our own messages: one line, prefixed; click's usage errors are its own.
                lines = [line for line in err.splitlines() if line.startswith("sqla-scheduler:")]
                assert len(lines) == 1, (args, err)
                assert "\n" not in lines[0]
                assert err.strip().splitlines()[-1] == lines[0], (args, err)
    finally:
        for _args, proc, _code, _text in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()


@pytest.mark.parametrize(
    ("signum", "backend"),
    [(signal.SIGINT, "asyncio"), (signal.SIGTERM, "asyncio"), (signal.SIGTERM, "trio")],
    ids=["SIGINT", "SIGTERM", "SIGTERM-trio"],
)
def test_worker_stops_gracefully_on_signal(
    workers: Workers, app_db: Engine, pg_url: str, signum: signal.Signals, backend: str
) -> None:
    """An execution completes; a signal then stops the worker with exit code 0, and the
    execution still running past ``shutdown_max_wait`` is released, not left picked."""
    worker = workers.start("solo", "--backend", backend, "--concurrency", "4", SHUTDOWN_WAIT_MS=300)
    workers.wait_started(worker)
    client = build_scheduler(pg_url, name="client")
    try:
        client.schedule(app_db, one_time_task(client, "record").instance("r-1"))
        wait_until(
            lambda: (
                scalar(app_db, "select count(*) from runs where instance = 'r-1'") == 1
                and scalar(app_db, "select count(*) from scheduled_tasks") == 0
            ),
            20,
            "r-1 to run",
            workers.report,
        )
        client.schedule(app_db, one_time_task(client, "slow").instance("s-1"))
        wait_until(
            lambda: scalar(app_db, "select count(*) from runs where phase = 'started'") == 1,
            20,
            "s-1 to start",
            workers.report,
        )
    finally:
        engine_of(client).dispose()

    worker.signal(signum)
    assert worker.proc.wait(timeout=30) == 0, workers.report()

    output = worker.output()
    assert f"received {signum.name}: stopping gracefully" in output
    assert "scheduler 'solo' stopped" in output
    assert "Traceback" not in output
    (left,) = rows(
        app_db, "select task_instance, picked, picked_by, consecutive_failures from scheduled_tasks"
    )
    assert left == ("s-1", False, None, 0)  # released as it was, for another worker
    assert scalar(app_db, "select count(*) from scheduled_tasks where picked") == 0
    assert rows(app_db, "select instance, worker, phase from runs order by id") == [
        ("r-1", "solo", "done"),
        ("s-1", "solo", "started"),
    ]


def test_environment_sits_between_the_flags_and_the_module(
    workers: Workers, app_db: Engine
) -> None:
    """``SQLA_SCHEDULER_*`` variables override the module's config, flags override them,
    and the worker says at start which settings the environment gave."""
    worker = workers.start(
        "from-env",
        "--concurrency",
        "2",
        WORKER_NAME="module-name",  # the module's own scheduler_name
        SQLA_SCHEDULER_SCHEDULER_NAME="from-env",
        SQLA_SCHEDULER_CONCURRENCY="3",  # the module says 10; --concurrency wins
        SQLA_SCHEDULER_SHUTDOWN_MAX_WAIT="250ms",
        SQLA_SCHEDULER_LOG_LEVEL="debug",
    )
    workers.wait_started(worker)
    output = worker.output()
    assert (
        "settings from the environment: SQLA_SCHEDULER_LOG_LEVEL=debug, "
        "SQLA_SCHEDULER_CONCURRENCY=3 (overridden by --concurrency), "
        "SQLA_SCHEDULER_SCHEDULER_NAME=from-env, SQLA_SCHEDULER_SHUTDOWN_MAX_WAIT=250ms"
    ) in output
    assert "scheduler 'from-env' started" in output
    assert ", concurrency 2" in output
    assert " DEBUG " in output  # the level the environment asked for
    assert rows(app_db, "select name, concurrency from scheduled_tasks_nodes") == [("from-env", 2)]
    worker.signal(signal.SIGTERM)
    assert worker.proc.wait(timeout=30) == 0, workers.report()
    assert "stopping gracefully (up to 250ms for running executions" in worker.output()


def test_a_signal_while_the_app_loads_stops_cleanly(
    workers: Workers, app_db: Engine, tmp_path: Path
) -> None:
    """SIGTERM in the second an application takes to load: the worker stops before its
    scheduler starts, with status 0, where the signal used to kill it (-15)."""
    mark = tmp_path / "loading"
    worker = workers.start("early", IMPORT_SLEEP_MS=1000, IMPORT_MARK=mark)
    wait_until(mark.exists, 20, "the app to begin loading", workers.report)
    worker.signal(signal.SIGTERM)
    assert worker.proc.wait(timeout=30) == 0, workers.report()
    output = worker.output()
    assert "received SIGTERM while loading: stopping before the scheduler starts" in output
    assert "scheduler 'early' started" not in output
    assert rows(app_db, "select name from scheduled_tasks_nodes") == []


def _running(
    workers: Workers, app_db: Engine, pg_url: str, task: str, phase: str, **env: Any
) -> Worker:
    """A worker ``solo`` (with ``env``) that has run ``task``'s one instance up to the
    ``runs`` row of ``phase``."""
    worker = workers.start("solo", **env)
    workers.wait_started(worker)
    client = build_scheduler(pg_url, name="client")
    try:
        client.schedule(app_db, one_time_task(client, task).instance(f"{task}-1"))
    finally:
        engine_of(client).dispose()
    wait_until(
        lambda: scalar(app_db, "select count(*) from runs where phase = :p", p=phase) == 1,
        20,
        f"{task}-1 to reach {phase}",
        workers.report,
    )
    return worker


def _running_slow(workers: Workers, app_db: Engine, pg_url: str) -> Worker:
    """A worker ``solo`` (10 minutes for running executions at a stop) whose handler of
    ``slow/slow-1`` has started, and runs until the test ends."""
    return _running(workers, app_db, pg_url, "slow", "started", SHUTDOWN_WAIT_MS=600_000)


def test_second_signal_stops_at_once(workers: Workers, app_db: Engine, pg_url: str) -> None:
    """The second signal does not wait for running executions: exit 128 + signal number,
    and what was running is released at once for another worker."""
    worker = _running_slow(workers, app_db, pg_url)
    worker.signal(signal.SIGTERM)
    wait_until(
        lambda: "received SIGTERM: stopping gracefully" in worker.output(),
        20,
        "the graceful stop to begin",
        workers.report,
    )
    worker.signal(signal.SIGINT)
    assert worker.proc.wait(timeout=30) == 128 + signal.SIGINT, workers.report()
    output = worker.output()
    assert "received SIGINT while stopping: stopping at once" in output
    assert "sqla-scheduler: stopped at once by a second SIGINT" in output
    assert "Traceback" not in output
    assert rows(app_db, "select task_instance, picked, picked_by from scheduled_tasks") == [
        ("slow-1", False, None)
    ], workers.report()


def test_a_second_signal_ends_the_process_whatever_it_waits_on(
    workers: Workers, app_db: Engine, pg_url: str
) -> None:
    """An ``on_abandon`` hook that does not return holds up the stop's last commit, in a
    thread nothing can cancel: the second signal still ends the process within
    ``FORCED_STOP_WITHIN``, with 128 + its number, saying what it left."""
    worker = _running(workers, app_db, pg_url, "stuck", "hooked")
    worker.signal(signal.SIGTERM)
    wait_until(lambda: "stopping gracefully" in worker.output(), 20, "the stop", workers.report)
    worker.signal(signal.SIGTERM)
    forced = time.monotonic()
    assert worker.proc.wait(timeout=FORCED_STOP_WITHIN + 20) == 128 + signal.SIGTERM
    took = time.monotonic() - forced
    assert took < FORCED_STOP_WITHIN + 5, workers.report()
    assert "still stopping 10.0s after the second signal: exiting with status 143" in (
        worker.output()
    ), workers.report()
    # the abandon never committed: its row stays, picked, for revival
    assert rows(app_db, "select task_instance, picked from scheduled_tasks") == [("stuck-1", True)]


def test_a_release_held_up_past_the_grace_is_waited_for(
    workers: Workers, app_db: Engine, pg_url: str
) -> None:
    """After the second signal the running execution is released; when the database holds
    that release up (here a lock on its row) past the handlers' last grace (``STOP_GRACE``),
    the worker still waits for it to commit rather than exit with the row picked."""
    worker = _running_slow(workers, app_db, pg_url)
    with app_db.connect() as blocker:
        blocker.execute(
            text("select 1 from scheduled_tasks where task_instance = 'slow-1' for update")
        )
        worker.signal(signal.SIGTERM)
        wait_until(lambda: "stopping gracefully" in worker.output(), 20, "the stop", workers.report)
        worker.signal(signal.SIGINT)
        wait_until(
            lambda: (
                scalar(
                    app_db,
                    "select count(*) from pg_stat_activity"
                    " where wait_event_type = 'Lock' and query like '%scheduled_tasks%'",
                )
                == 1
            ),
            20,
            "the release to wait for the row's lock",
            workers.report,
        )
        # past the grace the workers' handlers get after their cancellation
        wait_until(
            lambda: (
                "the stop waits for 1 outcome(s) the database has not committed" in worker.output()
                or worker.proc.poll() is not None
            ),
            20,
            "the grace to end",
            workers.report,
        )
        blocker.rollback()
    assert worker.proc.wait(timeout=30) == 128 + signal.SIGINT, workers.report()
    output = worker.output()
    assert "Traceback" not in output, workers.report()
    assert "stopping without" not in output, workers.report()  # no handler was left running
    assert rows(app_db, "select task_instance, picked, picked_by from scheduled_tasks") == [
        ("slow-1", False, None)
    ], workers.report()


# --- trio -----------------------------------------------------------------------------------


def test_scheduler_runs_under_trio_with_a_sync_engine(app_db: Engine, pg_url: str) -> None:
    scheduler = build_scheduler(pg_url, name="trio-in-process", concurrency=4)
    record = one_time_task(scheduler, "record")
    scheduler.schedule_batch(app_db, [record.instance(f"r-{i}") for i in range(20)])
    seen: list[str] = []

    def done() -> bool:
        return bool(
            scalar(app_db, "select count(*) from runs") == 20
            and scalar(app_db, "select count(*) from scheduled_tasks") == 0
        )

    async def main() -> None:
        seen.append(sniffio.current_async_library())
        async with anyio.create_task_group() as group:
            await group.start(scheduler.run)
            await wait_for(done, 20)
            scheduler.request_stop()

    try:
        anyio.run(main, backend="trio")
    finally:
        engine_of(scheduler).dispose()
    assert seen == ["trio"]
    assert not scheduler.running
    assert scalar(app_db, "select count(distinct instance) from runs") == 20


def test_async_engine_under_trio_fails_at_once(pg_url: str) -> None:
    engine = create_async_engine(pg_url)
    scheduler = Scheduler(engine, [one_time("t")(lambda ctx: None)])
    with pytest.raises(RuntimeError, match=r"AsyncEngine only runs on asyncio; under trio"):
        anyio.run(scheduler.run, backend="trio")
    assert not scheduler.running
    # The same through the worker, before any signal handler or connection matters.
    with pytest.raises(RuntimeError, match=r"under trio, give the Scheduler a sync Engine"):
        run_worker(scheduler, backend="trio")
    assert engine.sync_engine.pool.checkedout() == 0  # type: ignore[attr-defined]
