"""``sqla-scheduler worker --health-port``: a real worker process serves /livez, /readyz and
/metrics; liveness holds while its database is down and after a newer version upgraded the
schema, readiness goes 503 and back, and SIGTERM still stops it."""

from __future__ import annotations

import signal
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, column, create_engine, table, update

from sqla_scheduler import migrate
from tests.concurrency.app import metadata
from tests.support.http import get
from tests.support.servers.base import free_port
from tests.support.servers.postgres import PostgresCluster
from tests.support.workers import Workers, wait_until


def _until(port: int, path: str, status: int, deadline: float = 30) -> str:
    """Poll ``path`` until it answers ``status``; its body then."""
    give_up = time.monotonic() + deadline
    last: tuple[int, str] | None = None
    while time.monotonic() < give_up:
        try:
            last = get(port, path)
        except OSError as error:  # not listening yet
            last = (0, str(error))
        if last[0] == status:
            return last[1]
        time.sleep(0.05)
    raise AssertionError(f"{path} never answered {status}: last {last}")


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A cluster of this test's own, to stop and start under a running worker."""
    with PostgresCluster() as cluster:
        cluster.create_database("app")
        migrate.upgrade(cluster.url("app"))
        yield cluster


def test_probes_of_a_worker_through_an_outage_and_a_newer_schema(
    own_cluster: PostgresCluster, tmp_path: Path
) -> None:
    url = own_cluster.url("app")
    engine: Engine = create_engine(url)
    metadata.create_all(engine)
    engine.dispose()
    port = free_port()
    workers = Workers(url, tmp_path)
    try:
        worker = workers.start("probed", "--health-port", str(port), POLL_MS=200)
        workers.wait_started(worker)
        assert "live: the event loop ticked" in _until(port, "/livez", 200)
        assert "the schema is at step" in _until(port, "/readyz", 200)
        status, body = get(port, "/metrics")
        assert status == 200
        assert "python_info" in body  # the default registry's own collectors
        assert get(port, "/nowhere")[0] == 404

        own_cluster.halt()
        unready = _until(port, "/readyz", 503)
        assert unready == "not ready: the database did not answer (see the log)\n"
        assert str(own_cluster.port) not in unready
        assert get(port, "/livez")[0] == 200  # a restart would not bring the database back
        own_cluster.resume()
        _until(port, "/readyz", 200)
        # the outage in a few lines: each service's first failure, then that it is back
        wait_until(
            lambda: "picking due executions works again" in worker.output(),
            30,
            "the picker to say it works again",
            workers.report,
        )
        wait_until(
            lambda: (
                "the LISTEN connection (polling every 200ms meanwhile) works again"
                in worker.output()
            ),
            30,
            "the listener to say it is back",
            workers.report,
        )
        outage = worker.output()
        assert outage.count("picking due executions failed") == 1, workers.report()
        assert "Traceback" not in outage, workers.report()

        # a newer version's migration step, which this version does not know
        engine = create_engine(url)
        versions = table(migrate.VERSION_TABLE, column("version_num"))
        with engine.begin() as conn:
            conn.execute(update(versions).values(version_num="0123456789ab"))
        engine.dispose()
        assert "the schema is ahead" in _until(port, "/readyz", 200)
        assert get(port, "/livez")[0] == 200

        worker.signal(signal.SIGTERM)
        assert worker.proc.wait(timeout=30) == 0, workers.report()
        assert "scheduler 'probed' stopped" in worker.output()
        # each /readyz read the schema through Alembic, which says nothing in a worker's log
        assert "alembic.runtime.migration" not in worker.output()
        with pytest.raises(urllib.error.URLError, match="Connection refused"):
            get(port, "/livez")  # the probes went with it
    finally:
        workers.close()
