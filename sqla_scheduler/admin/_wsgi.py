"""The admin page as a WSGI app, for Flask and other WSGI applications.

The ASGI app of ``create_app`` behind a2wsgi's ``ASGIMiddleware``, a maintained adapter
that runs the app on an event loop of its own (in a thread) and hands each WSGI request
to it; the page's reads go through the scheduler's engine as they do under ASGI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from sqla_scheduler._extras import missing_extra
from sqla_scheduler.admin._app import create_app
from sqla_scheduler.scheduler import Scheduler

if TYPE_CHECKING:
    from _typeshed.wsgi import WSGIApplication

__all__ = ["create_wsgi_app"]


def create_wsgi_app(
    scheduler: Scheduler,
    *,
    username: str = "admin",
    password: str | None = None,
    actions: bool = False,
    secret: bytes | None = None,
    page_size: int = 50,
) -> WSGIApplication:
    """Build the admin page of ``scheduler`` as a WSGI app that serves from its own root,
    with the parameters of ``create_app`` (and its checks, raised here).

    Mount it where it should live, e.g. with werkzeug's ``DispatcherMiddleware`` in Flask::

        app.wsgi_app = DispatcherMiddleware(
            app.wsgi_app, {"/admin/jobs": create_wsgi_app(scheduler, password=...)}
        )

    Its links follow the mount point (``SCRIPT_NAME``).
    """
    try:
        from a2wsgi import ASGIMiddleware
    except ImportError as exc:  # pragma: no cover - a2wsgi comes with the admin extra
        raise missing_extra("the admin page as a WSGI app", "a2wsgi", "admin") from exc
    asgi = create_app(
        scheduler,
        username=username,
        password=password,
        actions=actions,
        secret=secret,
        page_size=page_size,
    )
    # a2wsgi types its app with its own ASGI protocol, which Starlette's matches at run time.
    return cast("WSGIApplication", ASGIMiddleware(cast(Any, asgi)))
