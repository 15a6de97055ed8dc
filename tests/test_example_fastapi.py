"""examples/fastapi_app: schedule in the request transaction, run in the lifespan.

The second test is written the way the testing guide tells users to test their own
application: with the pytest plugin's fixtures, the loop off (no lifespan)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from sqlalchemy import create_engine

from examples.fastapi_app.app import Base, Confirmation, create_application
from sqla_scheduler import Scheduler
from sqla_scheduler.testing import ManualClock, ScheduledExecutions

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


@pytest.fixture
async def shop(pg_url: str) -> AsyncIterator[FastAPI]:
    app = create_application(pg_url, admin_password="s3cret")
    engine = create_engine(pg_url)
    Base.metadata.create_all(engine)  # what the lifespan would do; it does not run here
    engine.dispose()
    yield app
    await app.state.engine.dispose()


@pytest.fixture
def sqla_scheduler(shop: FastAPI) -> Scheduler:
    """The plugin's fixtures use the application's scheduler."""
    scheduler: Scheduler = shop.state.scheduler
    return scheduler


async def test_a_confirmation_is_scheduled_with_its_order_and_runs_when_due(
    shop: FastAPI,
    sqla_scheduler: Scheduler,
    scheduler_clock: ManualClock,
    scheduler_executions: ScheduledExecutions,
) -> None:
    transport = httpx.ASGITransport(app=shop)
    async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
        placed = await client.post("/orders", json={"id": 1, "customer": "ada@example.com"})
        assert placed.status_code == 201, placed.text
        blocked = await client.post("/orders", json={"id": 2, "customer": "eve@blocked.example"})
        assert blocked.status_code == 422

        scheduler_executions.assert_scheduled(
            "send-confirmation", "order-1", at=scheduler_clock.now(), payload=Confirmation(1)
        )
        scheduler_executions.assert_not_scheduled("send-confirmation", "order-2")
        assert (await client.get("/orders/1")).json() == {"id": 1, "confirmed": False}

        # an AsyncEngine: the test awaits run_due itself (scheduler_run_due is for sync ones)
        assert await sqla_scheduler.run_due() == 1
        assert (await client.get("/orders/1")).json() == {"id": 1, "confirmed": True}
        scheduler_executions.assert_not_scheduled("send-confirmation")
