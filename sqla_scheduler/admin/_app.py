"""The admin page: routes, page rendering and actions over one ``Scheduler``.

Every request reads the table in one transaction, on a worker thread for a sync engine
and through ``run_sync`` for an async one (both through ``_bridge.Database``). Links are built
from the ASGI ``root_path``, so the app works wherever it is mounted.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

import jinja2
from sqlalchemy import Connection
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from sqla_scheduler import _store
from sqla_scheduler._bridge import Database
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
    ExecutionView,
    relative,
    view_execution,
    view_recurring,
    view_tasks,
)
from sqla_scheduler.exceptions import ConfigurationError
from sqla_scheduler.executions import Execution, ExecutionState
from sqla_scheduler.models import MAX_INSTANCE_ID_LENGTH, MAX_TASK_NAME_LENGTH
from sqla_scheduler.scheduler import Scheduler
from sqla_scheduler.tasks import RECURRING_INSTANCE_ID

__all__ = ["create_app"]

logger = logging.getLogger("sqla_scheduler.admin")

T = TypeVar("T")

_HERE = Path(__file__).parent
#: How many rows of each section the overview shows; the listings page through the rest.
_SECTION_ROWS = 10
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
        Route("/", admin.overview, methods=["GET"]),
        Route("/executions", admin.executions, methods=["GET"]),
        Route("/execution", admin.execution, methods=["GET"]),
        Route("/api/summary", admin.api_summary, methods=["GET"]),
        Route("/api/executions", admin.api_executions, methods=["GET"]),
        Route("/api/execution", admin.api_execution, methods=["GET"]),
        Mount("/static", StaticFiles(directory=_HERE / "static"), name="static"),
    ]
    if actions:
        routes.append(Route("/actions/{action}", admin.act, methods=["POST"]))
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


@dataclass(frozen=True, slots=True, kw_only=True)
class _Listing:
    """A listing request: which executions, which page."""

    state: ExecutionState
    task: str | None
    instance: str | None
    page: int
    per_page: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    def query(self, **changes: Any) -> dict[str, Any]:
        params = {
            "state": self.state,
            "task": self.task,
            "instance": self.instance,
            "page": self.page,
        }
        params.update(changes)
        return params


class _Admin:
    """The request handlers of one admin app."""

    def __init__(
        self, scheduler: Scheduler, *, actions: bool, secret: bytes, page_size: int
    ) -> None:
        self.scheduler = scheduler
        self.db = Database(scheduler.engine)
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

    # --- database -------------------------------------------------------------------

    async def _db(self, fn: Callable[[Connection], T], *, read_only: bool = True) -> T:
        """Run ``fn`` in a transaction of the scheduler's engine, without blocking the loop."""
        return await self.db.run(fn, read_only=read_only)

    @property
    def _known(self) -> frozenset[str]:
        return frozenset(self.scheduler.tasks)

    def _view(self, execution: Execution, now: datetime) -> ExecutionView:
        return view_execution(
            execution, now=now, config=self.scheduler.config, tasks=self.scheduler.tasks
        )

    def _counts(self, conn: Connection, now: datetime) -> dict[str, int]:
        return _store.state_counts(conn, self.scheduler.table, known_tasks=self._known, now=now)

    async def _summary(self) -> dict[str, Any]:
        now = self.scheduler.clock.now()
        table, known = self.scheduler.table, self._known
        recurring_names = [
            name for name, task in self.scheduler.tasks.items() if task.kind == "recurring"
        ]
        section = partial(
            _store.list_executions,
            table=table,
            task_name=None,
            known_tasks=known,
            limit=_SECTION_ROWS,
            offset=0,
            now=now,
        )

        def read(conn: Connection) -> dict[str, Any]:
            return {
                "counts": self._counts(conn, now),
                "task_counts": _store.task_counts(conn, table, names=sorted(known), now=now),
                "recurring": _store.recurring_executions(
                    conn, table, names=recurring_names, instance_id=RECURRING_INSTANCE_ID
                ),
                "running": section(conn, state="running"),
                "failing": section(conn, state="failing"),
                "orphaned": section(conn, state="orphaned"),
            }

        found = await self._db(read)
        tasks = self.scheduler.tasks
        return {
            "now": now,
            "counts": found["counts"],
            "tasks": view_tasks(tasks, found["task_counts"]),
            "recurring": view_recurring(
                tasks, {name: self._view(e, now) for name, e in found["recurring"].items()}
            ),
            "running": [self._view(e, now) for e in found["running"]],
            "failing": [self._view(e, now) for e in found["failing"]],
            "orphaned": [self._view(e, now) for e in found["orphaned"]],
        }

    async def _listing(self, listing: _Listing) -> dict[str, Any]:
        now = self.scheduler.clock.now()
        table, known = self.scheduler.table, self._known
        filters: dict[str, Any] = {
            "state": listing.state,
            "task_name": listing.task,
            "instance_contains": listing.instance,
            "known_tasks": known,
            "now": now,
        }

        def read(conn: Connection) -> tuple[dict[str, int], int, list[Execution]]:
            counts = self._counts(conn, now)
            total = _store.count_executions(conn, table, **filters)
            rows = (
                _store.list_executions(
                    conn, table, limit=listing.per_page, offset=listing.offset, **filters
                )
                if listing.offset < total
                else []
            )
            return counts, total, rows

        counts, total, rows = await self._db(read)
        return {
            "now": now,
            "counts": counts,
            "total": total,
            "pages": max(1, math.ceil(total / listing.per_page)),
            "executions": [self._view(e, now) for e in rows],
        }

    async def _one(self, task: str, instance: str) -> tuple[datetime, dict[str, int], Any]:
        now = self.scheduler.clock.now()
        table = self.scheduler.table

        def read(conn: Connection) -> tuple[dict[str, int], Execution | None]:
            counts = self._counts(conn, now)
            return counts, _store.get_execution(conn, table, task, instance)

        counts, found = await self._db(read)
        return now, counts, None if found is None else self._view(found, now)

    # --- requests -------------------------------------------------------------------

    def _listing_params(self, request: Request) -> _Listing:
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
        per_page = _positive_int(q.get("per_page"), "per_page", default=self.page_size)
        if per_page > _MAX_PAGE_SIZE:
            raise HTTPException(400, f"per_page must be at most {_MAX_PAGE_SIZE}")
        return _Listing(
            state=state,  # type: ignore[arg-type]  # checked against STATES above
            task=task,
            instance=instance,
            page=page,
            per_page=per_page,
        )

    @staticmethod
    def _key_params(request: Request) -> tuple[str, str]:
        task = request.query_params.get("task")
        instance = request.query_params.get("instance")
        if not task or instance is None:
            raise HTTPException(400, "task and instance are required")
        return task, instance

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
        summary = await self._summary()
        return self._render(request, "overview.html", {**summary, "page_name": "overview"})

    async def executions(self, request: Request) -> Response:
        """One page of executions in a state, filtered by task name and instance id."""
        listing = self._listing_params(request)
        found = await self._listing(listing)
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
        task, instance = self._key_params(request)
        now, counts, view = await self._one(task, instance)
        if view is None:
            raise HTTPException(404, "There is no such execution (it may have completed).")
        return self._render(request, "execution.html", {"now": now, "counts": counts, "e": view})

    async def api_summary(self, request: Request) -> Response:
        """The overview as JSON."""
        s = await self._summary()
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
        listing = self._listing_params(request)
        found = await self._listing(listing)
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
        task, instance = self._key_params(request)
        _, _, view = await self._one(task, instance)
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
        now = self.scheduler.clock.now()
        table = self.scheduler.table

        def write(conn: Connection) -> tuple[bool, Execution | None]:
            if action == "delete":
                done = _store.cancel_shown(
                    conn, table, task_name=task, instance_id=instance, shown_version=shown
                )
            else:
                done = _store.reschedule_shown(
                    conn,
                    table,
                    task_name=task,
                    instance_id=instance,
                    shown_version=shown,
                    at=now,
                    now=now,
                )
            return done, None if done else _store.get_execution(conn, table, task, instance)

        done, current = await self._db(write, read_only=False)
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
    return dict(parse_qsl(text, keep_blank_values=True))
