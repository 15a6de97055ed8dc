"""examples/fastapi_app: schedule in the request transaction, run in the lifespan.

The second test is written the way the testing guide tells users to test their own
application: with the pytest plugin's fixtures, the loop off (no lifespan).

The module reads its environment when it is imported, as a user's does: each test imports
it afresh on its own database."""

from __future__ import annotations

import importlib
import sys
from collections.abc import AsyncIterator
from types import ModuleType

import anyio
import httpx
import pytest
from asgi_lifespan import LifespanManager
from sqlalchemy import create_engine

from sqla_scheduler import Scheduler
from sqla_scheduler.testing import ManualClock, ScheduledExecutions

pytestmark = pytest.mark.anyio


@pytest.fixture
def shop(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``examples/fastapi_app/app.py``, imported on ``pg_url``."""
    monkeypatch.setenv("DATABASE_URL", pg_url)
    monkeypatch.setenv("ADMIN_PASSWORD", "s3cret")
    monkeypatch.delitem(sys.modules, "examples.fastapi_app.app", raising=False)
    return importlib.import_module("examples.fastapi_app.app")


async def test_orders_are_confirmed_and_a_failed_request_schedules_nothing(
    shop: ModuleType,
) -> None:
    scheduler = shop.scheduler
    async with (
        LifespanManager(shop.app) as manager,
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
        engine = shop.engine
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
async def sqla_scheduler(shop: ModuleType, pg_url: str) -> AsyncIterator[Scheduler]:
    """The plugin's fixtures use the application's scheduler. Its orders table, which the
    lifespan would create: the lifespan does not run here."""
    engine = create_engine(pg_url)
    shop.Base.metadata.create_all(engine)
    engine.dispose()
    scheduler: Scheduler = shop.scheduler
    yield scheduler
    await shop.engine.dispose()


async def test_a_confirmation_is_scheduled_with_its_order_and_runs_when_due(
    shop: ModuleType,
    sqla_scheduler: Scheduler,
    scheduler_clock: ManualClock,
    scheduler_executions: ScheduledExecutions,
) -> None:
    transport = httpx.ASGITransport(app=shop.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://shop") as client:
        placed = await client.post("/orders", json={"id": 1, "customer": "ada@example.com"})
        assert placed.status_code == 201, placed.text
        blocked = await client.post("/orders", json={"id": 2, "customer": "eve@blocked.example"})
        assert blocked.status_code == 422

        scheduler_executions.assert_scheduled(
            "send-confirmation", "order-1", at=scheduler_clock.now(), payload=shop.Confirmation(1)
        )
        scheduler_executions.assert_not_scheduled("send-confirmation", "order-2")
        assert (await client.get("/orders/1")).json() == {"id": 1, "confirmed": False}

        # an AsyncEngine: the test awaits run_due itself (scheduler_run_due is for sync ones)
        assert await sqla_scheduler.run_due() == 1
        assert (await client.get("/orders/1")).json() == {"id": 1, "confirmed": True}
        scheduler_executions.assert_not_scheduled("send-confirmation")
