"""What the admin page's checks share."""

import httpx

#: Set by each group's setup, read by the page's code through ``os.environ``.
PASSWORD = "correct horse battery staple"
AUTH = ("admin", PASSWORD)


def assert_the_page(anonymous: httpx.Response, signed_in: httpx.Response) -> None:
    """The admin page, behind the password, showing the application's task."""
    assert anonymous.status_code == 401, anonymous.text
    assert signed_in.status_code == 200, signed_in.text
    assert "send-confirmation" in signed_in.text


def assert_mounted(app: object) -> None:
    """``app`` serves the admin page at /admin/jobs/, as the page mounted it."""
    import anyio

    async def visit() -> None:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            assert_the_page(
                await client.get("/admin/jobs/"), await client.get("/admin/jobs/", auth=AUTH)
            )

    anyio.run(visit)
