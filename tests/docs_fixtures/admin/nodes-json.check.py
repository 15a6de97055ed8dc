"""After it: ``/api/summary`` of a page on the page's database, with the node it shows
recorded, answers ``nodes`` exactly as the page says."""

import json
from datetime import datetime, timezone
from pathlib import Path

import anyio
import httpx
from admin_page import AUTH, PASSWORD
from sqlalchemy import create_engine, insert

from sqla_scheduler import ManualClock, Scheduler
from sqla_scheduler.admin import create_app
from sqla_scheduler.models import nodes_table, table_for

documented = json.loads(Path("nodes.json").read_text())
(node,) = documented["nodes"]
engine = create_engine("sqlite:///app.db")
with engine.begin() as conn:
    row = {k: v for k, v in node.items() if k != "alive"}
    for at in ("started_at", "last_seen"):
        row[at] = datetime.fromisoformat(row[at])
    conn.execute(insert(nodes_table(table_for())), row)
clock = ManualClock(datetime(2030, 5, 17, 12, 0, tzinfo=timezone.utc))
app = create_app(Scheduler(engine, [], clock=clock), password=PASSWORD)


async def summary() -> dict[str, object]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        response = await client.get("/api/summary", auth=AUTH)
    assert response.status_code == 200, response.text
    found: dict[str, object] = response.json()
    return found


assert anyio.run(summary)["nodes"] == documented
engine.dispose()
