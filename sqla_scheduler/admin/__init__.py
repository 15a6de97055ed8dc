"""The admin page: what the scheduler's table holds, in a browser and as JSON.

An ASGI app (Starlette, server-rendered pages, one small script for the time zone) to
mount in a FastAPI or Starlette application, behind HTTP Basic auth with no default
password::

    from sqla_scheduler.admin import create_app

    app.mount("/admin/jobs", create_app(scheduler, password=os.environ["ADMIN_PASSWORD"]))

``create_wsgi_app`` builds the same page as a WSGI app, for Flask and other WSGI apps.

It shows the scheduler nodes, alive or stale; the registered tasks by kind, paused or
not; the recurring tasks with their schedule, next run, last success and failure and
owner; running executions with their picker and heartbeat age; failing executions, latest
failure first; orphaned rows; counts per state; the history of finished attempts with
its dead letters; the kept results of tasks with ``keep_result``; and the groups
(``Scheduler.schedule_group``, chains) with their progress. It is read-only unless built
with ``actions=True`` (run now, retry, delete, requeue, pause, resume, cancel a group).

Needs the ``admin`` extra: ``pip install sqla-scheduler[admin]``.
"""

from __future__ import annotations

from sqla_scheduler._extras import missing_extra

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a test with the imports hidden
    raise missing_extra(__name__, f"the admin extra ({exc.name} is missing)", "admin") from exc

from collections.abc import Mapping

from sqla_scheduler.admin._app import create_app
from sqla_scheduler.admin._wsgi import create_wsgi_app
from sqla_scheduler.exceptions import ConfigurationError
from sqla_scheduler.scheduler import Scheduler

__all__ = ["create_app", "create_wsgi_app", "credentials_from_env", "serve"]


def credentials_from_env(environ: Mapping[str, str]) -> tuple[str, str]:
    """The admin user name and password from ``ADMIN_USER`` (default ``admin``) and
    ``ADMIN_PASSWORD`` (required) in ``environ``, e.g. ``os.environ``.

    Raises ``ConfigurationError`` naming ``ADMIN_PASSWORD`` when it is missing or empty.
    """
    username = environ.get("ADMIN_USER") or "admin"
    password = environ.get("ADMIN_PASSWORD") or ""
    if not password:
        raise ConfigurationError(
            "ADMIN_PASSWORD is not set: the admin page has no default password; "
            "set ADMIN_PASSWORD (and optionally ADMIN_USER, default 'admin')"
        )
    return username, password


def serve(
    scheduler: Scheduler,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    username: str = "admin",
    password: str | None = None,
    actions: bool = False,
    path: str = "/admin/jobs",
) -> None:
    """Serve the admin page of ``scheduler`` at ``http://host:port{path}/`` with uvicorn,
    until interrupted; ``/`` redirects there. Reads nothing from the environment: see
    ``credentials_from_env``."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import RedirectResponse
    from starlette.routing import Mount, Route

    page = create_app(scheduler, username=username, password=password, actions=actions)
    mount = "/" + path.strip("/")

    async def to_page(request: Request) -> RedirectResponse:
        return RedirectResponse(f"{mount}/")

    site = Starlette(routes=[Route("/", to_page), Mount(mount, app=page)])
    try:
        import uvicorn
    except ImportError as exc:  # pragma: no cover - uvicorn comes with the admin extra
        raise missing_extra("serving the admin page", "uvicorn", "admin") from exc
    uvicorn.run(site, host=host, port=port, proxy_headers=False, server_header=False)
