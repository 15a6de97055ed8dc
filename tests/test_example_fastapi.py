"""examples/fastapi_app: schedule in the request transaction, run in the lifespan."""

from __future__ import annotations

import anyio
import httpx
import pytest
from asgi_lifespan import LifespanManager

from examples.fastapi_app.app import create_application

pytestmark = pytest.mark.anyio


async def test_orders_are_confirmed_and_a_failed_request_schedules_nothing(pg_url: str) -> None:
    app = create_application(pg_url, admin_password="s3cret")
    scheduler = app.state.scheduler
    async with (
        LifespanManager(app) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app), base_url="http://shop"
        ) as client,
    ):
        assert scheduler.running
        placed = await client.post("/orders", json={"id": 1, "customer": "ada@example.com"})
        assert placed.status_code == 201, placed.text
        blocked = await client.post("/orders", json={"id": 2, "customer": "eve@blocked.example"})
        assert blocked.status_code == 422

        with anyio.fail_after(20):
            while not (await client.get("/orders/1")).json()["confirmed"]:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        # the failed request rolled back its order and its confirmation together
        assert (await client.get("/orders/2")).status_code == 404
        engine = app.state.engine
        assert await scheduler.get_execution(engine, "send-confirmation", "order-2") is None
        assert await scheduler.get_execution(engine, "send-confirmation", "order-1") is None

        assert (await client.get("/admin/jobs/")).status_code == 401
        wrong = await client.get("/admin/jobs/", auth=("admin", "wrong"))
        assert wrong.status_code == 401
        page = await client.get("/admin/jobs/", auth=("admin", "s3cret"))
        assert page.status_code == 200
        assert "send-confirmation" in page.text
    assert not scheduler.running
