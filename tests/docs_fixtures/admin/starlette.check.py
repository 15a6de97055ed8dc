"""After it: the application serves the admin page where it was mounted."""

import anyio
import httpx
from admin_page import AUTH, assert_the_page


async def visit() -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        assert_the_page(
            await client.get("/admin/jobs/"), await client.get("/admin/jobs/", auth=AUTH)
        )


anyio.run(visit)
