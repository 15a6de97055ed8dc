"""examples/flask_app: a sync session in the request, the loop on a background thread.

In this process, through Flask's test client; ``tests/integrations/test_flask.py`` serves
an application with ``flask run`` in real processes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from examples.flask_app.app import create_application


def test_orders_are_confirmed_and_a_failed_request_schedules_nothing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    app = create_application(url)
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
