"""After it: the loop runs for the application's lifespan, an order and its confirmation
commit together, a refused order leaves neither, and the admin page is mounted."""

import anyio
import httpx
from asgi_lifespan import LifespanManager


async def drive() -> None:
    async with (
        LifespanManager(app) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app), base_url="http://shop"
        ) as client,
    ):
        assert scheduler.running
        placed = await client.post("/orders", json={"id": 1, "customer": "ada@example.com"})
        assert (placed.status_code, placed.json()) == (201, {"id": 1}), placed.text
        refused = await client.post("/orders", json={"id": 2, "customer": "eve@blocked.example"})
        assert refused.status_code == 422, refused.text
        assert (await client.get("/admin/jobs/")).status_code == 401
        page = await client.get("/admin/jobs/", auth=("admin", PASSWORD))
        assert page.status_code == 200, page.text
    assert not scheduler.running
    async with AsyncSession(engine) as session:
        assert await session.get(Order, 1) is not None
        assert await session.get(Order, 2) is None
    assert await scheduler.get_execution(engine, "send-confirmation", "order-2") is None
    await scheduler.run_due()  # what the loop does at its next poll
    assert confirmed == [1], confirmed
    await engine.dispose()


anyio.run(drive)
