"""After it: a report rendered within the request answers with its result, and the poll
finds it again; one not finished answers 202 with where to ask, one cancelled 500, and an
unknown key 404."""

from datetime import datetime, timedelta, timezone

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
        made = await client.post("/reports", json={"customer_id": 42, "month": "2030-05"})
        rendered = {"url": "/reports/42/2030-05.pdf", "pages": 12}
        assert (made.status_code, made.json()) == (200, rendered), made.text
        again = await client.get("/reports/report-42-2030-05")
        assert (again.status_code, again.json()) == (200, rendered), again.text

        later = datetime.now(timezone.utc) + timedelta(hours=1)
        request = ReportRequest(7, "2030-06")
        await scheduler.schedule(engine, render_report.instance("report-7", request, at=later))
        waiting = await client.get("/reports/report-7")
        assert waiting.status_code == 202, waiting.text
        assert waiting.json() == {"status": "pending", "poll": "/reports/report-7"}
        assert await scheduler.cancel(engine, "render-report", "report-7")
        cancelled = await client.get("/reports/report-7")
        assert (cancelled.status_code, cancelled.json()) == (500, {"status": "cancelled"})

        assert (await client.get("/reports/never-asked")).status_code == 404
    await engine.dispose()


anyio.run(drive)
