"""examples/flask_app: a sync session in the request, the loop on a background thread.

In this process, through Flask's test client; ``tests/integrations/test_flask.py`` serves
an application with ``flask run`` in real processes. The second test is written the way
the testing guide tells users to test their own application: with the pytest plugin's
fixtures, the loop off."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from flask import Flask
from sqlalchemy import create_engine, text

from examples.flask_app.app import Confirmation, create_application
from sqla_scheduler import Scheduler
from sqla_scheduler.testing import ManualClock, ScheduledExecutions


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The database the application reads from ``DATABASE_URL``, a SQLite file."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    return url


def test_orders_are_confirmed_and_a_failed_request_schedules_nothing(url: str) -> None:
    app = create_application()
    scheduler = app.extensions["sqla_scheduler"]
    try:
        assert not scheduler.running  # until the first request
        client = app.test_client()
        placed = client.post("/orders", json={"id": 1, "customer": "ada@example.com"})
        assert placed.status_code == 201, placed.text
        assert scheduler.running
        blocked = client.post("/orders", json={"id": 2, "customer": "eve@blocked.example"})
        assert blocked.status_code == 422

        deadline = time.monotonic() + 20
        while not client.get("/orders/1").get_json()["confirmed"]:
            if time.monotonic() > deadline:
                pytest.fail("order 1 was not confirmed within 20s")
            time.sleep(0.02)
        assert client.get("/orders/2").status_code == 404
    finally:
        scheduler.stop()
    assert not scheduler.running
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            left = conn.execute(text("SELECT task_instance FROM scheduled_tasks")).all()
        assert left == []  # order-1 ran and was removed; order-2 never existed
    finally:
        engine.dispose()


@pytest.fixture
def flask_app(url: str) -> Flask:
    app = create_application()
    app.config["SQLA_SCHEDULER_RUN"] = False  # the test runs what is due itself
    return app


@pytest.fixture
def sqla_scheduler(flask_app: Flask) -> Scheduler:
    """The plugin's fixtures use the application's scheduler."""
    scheduler: Scheduler = flask_app.extensions["sqla_scheduler"]
    return scheduler


def test_a_confirmation_is_scheduled_with_its_order_and_runs_when_due(
    flask_app: Flask,
    scheduler_clock: ManualClock,
    scheduler_run_due: Callable[[], int],
    scheduler_executions: ScheduledExecutions,
) -> None:
    client = flask_app.test_client()
    assert client.post("/orders", json={"id": 1, "customer": "ada@example.com"}).status_code == 201
    assert (
        client.post("/orders", json={"id": 2, "customer": "eve@blocked.example"}).status_code == 422
    )

    scheduler_executions.assert_scheduled(
        "send-confirmation", "order-1", at=scheduler_clock.now(), payload=Confirmation(1)
    )
    scheduler_executions.assert_not_scheduled("send-confirmation", "order-2")
    assert client.get("/orders/1").get_json() == {"id": 1, "confirmed": False}

    assert scheduler_run_due() == 1
    assert client.get("/orders/1").get_json() == {"id": 1, "confirmed": True}
    scheduler_executions.assert_not_scheduled("send-confirmation")
