"""The admin page: routes, page rendering and actions over one ``Scheduler``.

Every request reads the table in one transaction (see ``_reads``). Links are built from
the ASGI ``root_path``, so the app works wherever it is mounted.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from sqla_scheduler.admin._reads import Listing, Reads
from sqla_scheduler.admin._security import (
    USER_KEY,
    AllowedMethods,
    BasicAuth,
    SecurityHeaders,
    csrf_token,
    csrf_valid,
)
from sqla_scheduler.admin._views import (
    STATES,
    relative,
)
from sqla_scheduler.exceptions import ConfigurationError
from sqla_scheduler.executions import Execution
from sqla_scheduler.models import MAX_INSTANCE_ID_LENGTH, MAX_TASK_NAME_LENGTH
from sqla_scheduler.scheduler import Scheduler

__all__ = ["create_app"]

logger = logging.getLogger("sqla_scheduler.admin")

T = TypeVar("T")

_HERE = Path(__file__).parent
_MAX_PAGE_SIZE = 500
_MAX_FORM_BYTES = 16 * 1024
_REFRESH_RANGE = (2, 3600)
#: What each action does to the row, in words for the log and the confirmation.
_ACTIONS = {
    "run-now": "rescheduled to now",
    "retry": "rescheduled to now for a retry",
    "delete": "deleted",
}


def create_app(
    scheduler: Scheduler,
    *,
    username: str = "admin",
    password: str | None = None,
    actions: bool = False,
    secret: bytes | None = None,
    page_size: int = 50,
) -> ASGIApp:
    """Build the admin page of ``scheduler`` as an ASGI app that serves from its own root.

    Mount it where it should live, e.g. ``Mount("/admin/jobs", app=create_app(...))`` in
    Starlette or ``app.mount("/admin/jobs", create_app(...))`` in FastAPI. Every request
    needs HTTP Basic credentials ``username`` / ``password``; there is no default password,
    and building the app without one fails.

    The page is read-only unless ``actions`` is true; then it offers run now, retry and
    delete, each a POST form with a CSRF token that applies only if the execution is still
    at the version the page showed. Tokens are derived from ``secret`` (random per app by
    default; pass the same bytes to every process behind one load balancer).
    ``page_size`` is how many executions a listing page shows.
    """
    if not isinstance(scheduler, Scheduler):
        raise TypeError(f"create_app needs a Scheduler, got {type(scheduler).__name__}")
    if not password:
        raise ConfigurationError(
            "the admin page has no default password: set ADMIN_PASSWORD and pass "
            'password=os.environ["ADMIN_PASSWORD"]'
        )
    if not username or ":" in username:
        raise ConfigurationError(
            f"admin username must be non-empty and contain no ':', got {username!r}"
        )
    if not 1 <= page_size <= _MAX_PAGE_SIZE:
        raise ConfigurationError(f"page_size must be 1 to {_MAX_PAGE_SIZE}, got {page_size}")
    if secret is not None and len(secret) < 16:
        raise ConfigurationError("secret must be at least 16 bytes")
    admin = _Admin(
        scheduler,
        actions=actions,
        secret=secret if secret is not None else secrets.token_bytes(32),
        page_size=page_size,
    )
    methods = ["GET", "HEAD", "POST"] if actions else ["GET", "HEAD"]
    routes = [
        Route("/", _refusing_nul(admin.overview), methods=["GET"]),
        Route("/executions", _refusing_nul(admin.executions), methods=["GET"]),
        Route("/execution", _refusing_nul(admin.execution), methods=["GET"]),
        Route("/api/summary", _refusing_nul(admin.api_summary), methods=["GET"]),
        Route("/api/executions", _refusing_nul(admin.api_executions), methods=["GET"]),
        Route("/api/execution", _refusing_nul(admin.api_execution), methods=["GET"]),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    if actions:
        routes.append(Route("/actions/{action}", _refusing_nul(admin.act), methods=["POST"]))
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(
                BasicAuth,
                username=username,
                password=password,
                realm="sqla-scheduler admin",
            ),
            Middleware(AllowedMethods, methods=methods),
        ],
        exception_handlers={HTTPException: admin.http_error},
    )
    # Outside Starlette's own error middleware, so its 500 page gets the headers too.
    return SecurityHeaders(app)


class _Admin:
    """The request handlers of one admin app."""

    def __init__(
        self, scheduler: Scheduler, *, actions: bool, secret: bytes, page_size: int
    ) -> None:
        self.scheduler = scheduler
        self.reads = Reads(scheduler)
        self.actions = actions
        self.secret = secret
        self.page_size = page_size
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(_HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters["when"] = _when
        self.templates.filters["relative"] = relative
        self.templates.filters["number"] = "{:,}".format

    # --- requests -------------------------------------------------------------------

    def _render(
        self, request: Request, template: str, context: Mapping[str, Any], status: int = 200
    ) -> HTMLResponse:
        root: str = request.scope.get("root_path", "")
        refresh = _refresh(request)

        def url(path: str, **params: Any) -> str:
            """A link to ``path`` of this app, keeping the page's auto-refresh."""
            if refresh is not None and "refresh" not in params:
                params["refresh"] = refresh
            query = urlencode({k: v for k, v in params.items() if v is not None and v != ""})
            return root + path + ("?" + query if query else "")

        def here(**changes: Any) -> str:
            """A link to this page with some query parameters changed (``None`` drops one)."""
            params = {k: v for k, v in request.query_params.items() if k != "done"}
            for name, value in changes.items():
                if value is None:
                    params.pop(name, None)
                else:
                    params[name] = str(value)
            query = urlencode(params)
            return root + _app_path(request, query=False) + ("?" + query if query else "")

        user = request.scope.get(USER_KEY, "")
        html = self.templates.get_template(template).render(
            {
                "request_path": _app_path(request),
                "url": url,
                "here": here,
                "page_name": "",
                "page_state": "",
                "static": lambda name: f"{root}/static/{name}",
                "refresh": refresh,
                "actions": self.actions,
                "csrf": csrf_token(self.secret, user) if self.actions else "",
                "user": user,
                "scheduler_name": self.scheduler.config.scheduler_name,
                "table_name": self.scheduler.table.fullname,
                "states": STATES,
                "notice": _ACTIONS.get(request.query_params.get("done", "")),
                **context,
            }
        )
        return HTMLResponse(html, status_code=status)

    async def overview(self, request: Request) -> Response:
        """The overview: counts, tasks by kind, recurring tasks, and the first rows of the
        running, failing and orphaned executions."""
        summary = await self.reads.summary()
        return self._render(request, "overview.html", {**summary, "page_name": "overview"})

    async def executions(self, request: Request) -> Response:
        """One page of executions in a state, filtered by task name and instance id."""
        listing = _listing_params(request, self.page_size)
        found = await self.reads.listing(listing)
        return self._render(
            request,
            "executions.html",
            {
                **found,
                "listing": listing,
                "task_names": sorted(self.scheduler.tasks),
                "page_name": "executions",
                "page_state": listing.state,
            },
        )

    async def execution(self, request: Request) -> Response:
        """One execution, its payload in full."""
        task, instance = _key_params(request)
        now, counts, view = await self.reads.one(task, instance)
        if view is None:
            raise HTTPException(404, "There is no such execution (it may have completed).")
        return self._render(request, "execution.html", {"now": now, "counts": counts, "e": view})

    async def api_summary(self, request: Request) -> Response:
        """The overview as JSON."""
        s = await self.reads.summary()
        return JSONResponse(
            {
                "now": s["now"].isoformat(),
                "scheduler": self.scheduler.config.scheduler_name,
                "table": self.scheduler.table.fullname,
                "counts": s["counts"],
                "tasks": {kind: [t.to_json() for t in views] for kind, views in s["tasks"].items()},
                "recurring": [r.to_json() for r in s["recurring"]],
                "running": [v.to_json() for v in s["running"]],
                "failing": [v.to_json() for v in s["failing"]],
                "orphaned": [v.to_json() for v in s["orphaned"]],
            }
        )

    async def api_executions(self, request: Request) -> Response:
        """One page of a listing as JSON."""
        listing = _listing_params(request, self.page_size)
        found = await self.reads.listing(listing)
        return JSONResponse(
            {
                "state": listing.state,
                "task": listing.task,
                "instance": listing.instance,
                "page": listing.page,
                "per_page": listing.per_page,
                "pages": found["pages"],
                "total": found["total"],
                "executions": [v.to_json() for v in found["executions"]],
            }
        )

    async def api_execution(self, request: Request) -> Response:
        """One execution as JSON."""
        task, instance = _key_params(request)
        _, _, view = await self.reads.one(task, instance)
        if view is None:
            raise HTTPException(404, "There is no such execution (it may have completed).")
        return JSONResponse(view.to_json())

    async def act(self, request: Request) -> Response:
        """Run now, retry or delete one execution, if it is still as the page showed it."""
        action = request.path_params["action"]
        if action not in _ACTIONS:
            raise HTTPException(404, f"There is no action {action!r}.")
        user = request.scope.get(USER_KEY, "")
        form = await _read_form(request)
        if not csrf_valid(self.secret, user, form.get("csrf")):
            logger.warning("refused %s by %r: missing or wrong CSRF token", action, user)
            raise HTTPException(403, "The form's token is missing or wrong; reload the page.")
        task, instance = form.get("task"), form.get("instance")
        if not task or instance is None:
            raise HTTPException(400, "task and instance are required")
        shown = _positive_int(form.get("version"), "version", default=None)
        back = _safe_back(form.get("back"))
        done, current = await self.reads.act(action, task, instance, shown)
        outcome = _ACTIONS[action] if done else "refused: " + _why_not(current, shown)
        logger.info(
            "%s by %r on %r / %r (shown version %d): %s",
            action,
            user,
            task,
            instance,
            shown,
            outcome,
            extra={
                "admin_user": user,
                "admin_action": action,
                "task_name": task,
                "instance_id": instance,
                "shown_version": shown,
                "done": done,
            },
        )
        if done:
            root = request.scope.get("root_path", "")
            return RedirectResponse(root + _with_done(back, action), status_code=303)
        if current is None:
            raise HTTPException(404, "There is no such execution any more; nothing was done.")
        raise HTTPException(409, f"Nothing was done: {_why_not(current, shown)}.")

    async def http_error(self, request: Request, exc: Exception) -> Response:
        """Errors as JSON under ``/api``, as a page elsewhere."""
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers or {})
        if _app_path(request).startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=headers)
        return self._render(
            request,
            "message.html",
            {"status": exc.status_code, "message": exc.detail, "counts": None},
            status=exc.status_code,
        )


def _listing_params(request: Request, page_size: int) -> Listing:
    """The listing a request asks for; a 400 naming the parameter when it is wrong."""
    q = request.query_params
    state = q.get("state") or "all"
    if state not in STATES:
        raise HTTPException(400, f"state must be one of {', '.join(STATES)}")
    task = q.get("task") or None
    if task is not None and len(task) > MAX_TASK_NAME_LENGTH:
        raise HTTPException(400, f"task is longer than {MAX_TASK_NAME_LENGTH} characters")
    instance = q.get("instance") or None
    if instance is not None and len(instance) > MAX_INSTANCE_ID_LENGTH:
        raise HTTPException(400, f"instance is longer than {MAX_INSTANCE_ID_LENGTH} characters")
    page = _positive_int(q.get("page"), "page", default=1)
    per_page = _positive_int(q.get("per_page"), "per_page", default=page_size)
    if per_page > _MAX_PAGE_SIZE:
        raise HTTPException(400, f"per_page must be at most {_MAX_PAGE_SIZE}")
    return Listing(
        state=state,  # type: ignore[arg-type]  # checked against STATES above
        task=task,
        instance=instance,
        page=page,
        per_page=per_page,
    )


def _key_params(request: Request) -> tuple[str, str]:
    """The task name and instance id of a request for one execution."""
    task = request.query_params.get("task")
    instance = request.query_params.get("instance")
    if not task or instance is None:
        raise HTTPException(400, "task and instance are required")
    return task, instance


def _why_not(current: Execution | None, shown: int) -> str:
    if current is None:
        return "the execution no longer exists"
    if current.picked:
        return f"a scheduler ({current.picked_by}) is running the execution now"
    return (
        f"the execution changed since the page showed it "
        f"(version {shown} was shown, it is now at {current.version})"
    )


def _when(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _positive_int(raw: str | None, name: str, *, default: int | None) -> int:
    """``raw`` as a whole number of at least 1; ``default`` when absent (required if None)."""
    if raw is None or raw == "":
        if default is None:
            raise HTTPException(400, f"{name} is required")
        return default
    if not raw.isdigit() or len(raw) > 18:
        raise HTTPException(400, f"{name} must be a positive whole number")
    value = int(raw)
    if value < 1:
        raise HTTPException(400, f"{name} must be a positive whole number")
    return value


def _refresh(request: Request) -> int | None:
    raw = request.query_params.get("refresh", "")
    if not raw.isdigit() or len(raw) > 6:
        return None
    low, high = _REFRESH_RANGE
    return min(max(int(raw), low), high)


def _app_path(request: Request, *, query: bool = True) -> str:
    """The request's path within this app (without the mount point) and its query."""
    path: str = request.scope["path"]
    root: str = request.scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    if not query:
        return path
    query_string = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "done"])
    return path + ("?" + query_string if query_string else "")


def _safe_back(raw: str | None) -> str:
    """Where to return after an action: a path of this app, never another site."""
    if not raw or not raw.startswith("/") or raw.startswith("//") or "\\" in raw:
        return "/"
    parts = urlsplit(raw)
    if parts.scheme or parts.netloc or len(raw) > 2000:
        return "/"
    return raw


def _with_done(back: str, action: str) -> str:
    parts = urlsplit(back)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "done"]
    query.append(("done", action))
    return parts.path + "?" + urlencode(query)


def _refusing_nul(
    endpoint: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """``endpoint``, answering 400 to a query with a NUL character (no database stores one
    in text, so no execution can match it)."""

    async def checked(request: Request) -> Response:
        if any("\x00" in k or "\x00" in v for k, v in request.query_params.multi_items()):
            raise HTTPException(400, "A query parameter contains a NUL character.")
        return await endpoint(request)

    return checked


async def _read_form(request: Request) -> dict[str, str]:
    """An url-encoded form body, at most 16 KiB (the action forms are a few hundred bytes)."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        raise HTTPException(415, "Send the form as application/x-www-form-urlencoded.")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > _MAX_FORM_BYTES:
            raise HTTPException(413, "The form is too large.")
    try:
        text = body.decode()
    except UnicodeDecodeError:
        raise HTTPException(400, "The form is not UTF-8.") from None
    form = dict(parse_qsl(text, keep_blank_values=True))
    if any("\x00" in k or "\x00" in v for k, v in form.items()):
        raise HTTPException(400, "A form field contains a NUL character.")
    return form
