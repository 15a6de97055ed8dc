"""The admin page: its routes, and the pages and actions of the scheduler's executions.

Every request reads the table in one transaction (see ``_reads``); what pages share
(rendering, parameter checks, error pages) is ``_pages.Pages``; the history's pages are
``_history``'s, the kept results' ``_results``'s, the groups' ``_groups``'s.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from sqla_scheduler._checks import is_int
from sqla_scheduler._execution import EXECUTION_SORTS
from sqla_scheduler.admin._activity import ActivityPages
from sqla_scheduler.admin._bulk import BulkActions
from sqla_scheduler.admin._groups import GroupPages
from sqla_scheduler.admin._history import HistoryPages
from sqla_scheduler.admin._listings import Listing
from sqla_scheduler.admin._pages import (
    HERE,
    MAX_PAGE_SIZE,
    NOTICES,
    Handlers,
    Pages,
    back_to,
    execution_listing,
    found_json,
    known_names,
    log_action,
    offered_bulk,
    page_json,
    positive_int,
    refusing_nul,
)
from sqla_scheduler.admin._results import ResultPages
from sqla_scheduler.admin._security import AllowedMethods, BasicAuth, SecurityHeaders
from sqla_scheduler.admin._tasks import TaskActions
from sqla_scheduler.exceptions import ConfigurationError
from sqla_scheduler.executions import Execution
from sqla_scheduler.scheduler import Scheduler

__all__ = ["create_app"]

#: The actions on one execution.
_ACTIONS = ("run-now", "retry", "delete", "cancel")


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

    The page is read-only unless ``actions`` is true; then it offers run now (as
    ``Scheduler.run_now`` does), retry and delete, and cancel on a running execution (as
    ``Scheduler.cancel`` does: the process running it is asked to stop it), each a POST
    form with a CSRF token that applies only if the execution is still at the version the
    page showed; requeue on the
    dead letters (abandoned and undecodable history entries), as ``Scheduler.requeue``
    does; pause or resume on each task, as ``Scheduler.pause`` and ``resume`` do; and
    cancel on each group, as ``Scheduler.cancel_group`` does; and, after a confirmation
    that counts them, retry, delete, cancel, pause or requeue in bulk for what a list's
    filter selects (at most 10,000 rows per request: see ``_bulk``).
    Tokens are derived from ``secret`` (random per app by default; pass the same bytes to
    every process behind one load balancer). ``page_size`` is how many executions, history
    entries, kept results or groups a listing page shows.
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
    if not is_int(page_size) or not 1 <= page_size <= MAX_PAGE_SIZE:
        raise ConfigurationError(f"page_size must be 1 to {MAX_PAGE_SIZE}, got {page_size!r}")
    if secret is not None and len(secret) < 16:
        raise ConfigurationError("secret must be at least 16 bytes")
    pages = Pages(
        scheduler,
        actions=actions,
        secret=secret if secret is not None else secrets.token_bytes(32),
        page_size=page_size,
    )
    activity = ActivityPages(pages)
    executions, history, tasks = (
        _Executions(pages, activity),
        HistoryPages(pages),
        TaskActions(pages),
    )
    results, groups, bulk = ResultPages(pages), GroupPages(pages), BulkActions(pages)
    methods = ["GET", "HEAD", "POST"] if actions else ["GET", "HEAD"]
    routes = [
        Route("/", refusing_nul(executions.overview), methods=["GET"]),
        Route("/executions", refusing_nul(executions.listing), methods=["GET"]),
        Route("/execution", refusing_nul(executions.one), methods=["GET"]),
        Route("/api/summary", _api(executions.api_summary), methods=["GET"]),
        Route("/api/executions", _api(executions.api_listing, *_LISTING), methods=["GET"]),
        Route("/api/execution", _api(executions.api_one, "task", "instance"), methods=["GET"]),
        Route("/history", refusing_nul(history.listing), methods=["GET"]),
        Route("/dead-letters", refusing_nul(history.dead_letters), methods=["GET"]),
        Route("/history/entry", refusing_nul(history.entry), methods=["GET"]),
        Route("/api/history", _api(history.api_listing, *_HISTORY), methods=["GET"]),
        Route("/api/dead-letters", _api(history.api_dead_letters, *_HISTORY), methods=["GET"]),
        Route("/api/history/entry", _api(history.api_entry, "id"), methods=["GET"]),
        Route("/results", refusing_nul(results.listing), methods=["GET"]),
        Route("/api/results", _api(results.api_listing, *_RESULTS), methods=["GET"]),
        Route("/groups", refusing_nul(groups.listing), methods=["GET"]),
        Route("/groups/{group_id}", refusing_nul(groups.one), methods=["GET"]),
        Route("/api/groups", _api(groups.api_listing, *_GROUPS), methods=["GET"]),
        Route("/api/groups/{group_id}", _api(groups.api_one, *_MEMBERS), methods=["GET"]),
        Route("/api/activity", _api(activity.api, "span", "task"), methods=["GET"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    if actions:
        routes += [
            Route("/actions/requeue", refusing_nul(history.requeue), methods=["POST"]),
            Route("/actions/pause", refusing_nul(tasks.pause), methods=["POST"]),
            Route("/actions/resume", refusing_nul(tasks.resume), methods=["POST"]),
            Route("/actions/cancel-group", refusing_nul(groups.cancel), methods=["POST"]),
            Route("/bulk/{action}", refusing_nul(bulk.confirm), methods=["GET"]),
            Route("/bulk/{action}", refusing_nul(bulk.act), methods=["POST"]),
            Route("/actions/{action}", refusing_nul(executions.act), methods=["POST"]),
        ]
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
        exception_handlers={HTTPException: pages.http_error},
    )
    # Outside Starlette's own error middleware, so its 500 page gets the headers too.
    return SecurityHeaders(app)


#: What the listings find by beyond task, instance and outcome (see ``found_params``).
_FOUND = ("error", "since", "until", "sort", "dir")
_LISTING = ("state", "task", "instance", *_FOUND, "page", "per_page")
_HISTORY = ("task", "instance", "instance_contains", "outcome", *_FOUND, "page", "per_page")
_RESULTS = ("task", "instance", "instance_contains", "outcome", *_FOUND, "page", "per_page")
_GROUPS = ("task", "page", "per_page")
_MEMBERS = ("page", "per_page")


def _api(
    endpoint: Callable[[Request], Awaitable[Response]], *known: str
) -> Callable[[Request], Awaitable[Response]]:
    """``endpoint`` of the JSON API: a 400 naming a query parameter it does not take (a
    filter it would otherwise ignore, such as ``since``), and one with a NUL character."""

    async def checked(request: Request) -> Response:
        for name in request.query_params:
            if name not in known:
                takes = ", ".join(known) or "none"
                raise HTTPException(
                    400, f"unknown parameter {name[:40]!r} (this endpoint takes: {takes})"
                )
        return await endpoint(request)

    return refusing_nul(checked)


class _Executions(Handlers):
    """The request handlers of the overview and of the scheduler's executions."""

    def __init__(self, pages: Pages, activity: ActivityPages) -> None:
        super().__init__(pages)
        self.activity = activity

    async def overview(self, request: Request) -> Response:
        """The overview: counts, activity charts, nodes, tasks by kind (paused or not),
        recurring tasks, and the first rows of the running, failing and orphaned
        executions."""
        charts = await self.activity.section(request)  # first: a 400 for a bad span or task
        summary = await self.reads.summary()
        config = self.scheduler.config
        return self.pages.render(
            request,
            "overview.html",
            {
                **summary,
                **charts,
                "history_setting": config.history,
                "retention": config.history_retention,
                "page_name": "overview",
            },
        )

    async def listing(self, request: Request) -> Response:
        """One page of executions in a state, filtered by task name and instance id."""
        listing = _listing_params(request, self.pages.page_size)
        found = await self.reads.listing(listing)
        return self.pages.render(
            request,
            "executions.html",
            {
                **found,
                "listing": listing,
                "task_names": known_names(self.scheduler.tasks, found["seen_tasks"]),
                "sorts": EXECUTION_SORTS,
                "bulk_actions": offered_bulk(listing, self.scheduler.tasks),
                "page_name": "executions",
                "page_state": listing.state,
            },
        )

    async def one(self, request: Request) -> Response:
        """One execution, its payload in full."""
        task, instance = _key_params(request)
        header, view = await self.reads.one(task, instance)
        if view is None:
            raise HTTPException(404, "There is no such execution (it may have completed).")
        return self.pages.render(request, "execution.html", {**header, "e": view})

    async def api_summary(self, request: Request) -> Response:
        """The overview as JSON."""
        s = await self.reads.summary()
        return JSONResponse(
            {
                "now": s["now"].isoformat(),
                "scheduler": self.scheduler.config.scheduler_name,
                "table": self.scheduler.table.fullname,
                "counts": s["counts"],
                "nodes": s["nodes"].to_json(),
                "paused": s["paused"],
                "tasks": {kind: [t.to_json() for t in views] for kind, views in s["tasks"].items()},
                "history": {
                    "setting": self.scheduler.config.history,
                    "retention_seconds": self.scheduler.config.history_retention.total_seconds(),
                    "counted_outcomes": list(s["counted_outcomes"]),
                    "counted_seconds": s["outcomes_window"].total_seconds(),
                    "dead_letters": s["dead_letters"],
                },
                "recurring": [r.to_json() for r in s["recurring"]],
                "running": [v.to_json() for v in s["running"]],
                "failing": [v.to_json() for v in s["failing"]],
                "orphaned": [v.to_json() for v in s["orphaned"]],
            }
        )

    async def api_listing(self, request: Request) -> Response:
        """One page of a listing as JSON."""
        listing = _listing_params(request, self.pages.page_size)
        found = await self.reads.listing(listing)
        return JSONResponse(
            {
                "state": listing.state,
                "task": listing.task,
                "instance": listing.instance,
                **found_json(listing),
                **page_json(listing, found),
                "executions": [v.to_json() for v in found["executions"]],
            }
        )

    async def api_one(self, request: Request) -> Response:
        """One execution as JSON."""
        task, instance = _key_params(request)
        _, view = await self.reads.one(task, instance)
        if view is None:
            raise HTTPException(404, "There is no such execution (it may have completed).")
        return JSONResponse(view.to_json())

    async def act(self, request: Request) -> Response:
        """Run now, retry, delete or cancel one execution, if it is still as the page
        showed it."""
        action = request.path_params["action"]
        if action not in _ACTIONS:
            raise HTTPException(404, f"There is no action {action!r}.")
        user, form = await self.pages.checked_form(request, action)
        task, instance = form.get("task"), form.get("instance")
        if not task or instance is None:
            raise HTTPException(400, "task and instance are required")
        shown = positive_int(form.get("version"), "version", default=None)
        done, current = await self.actions.act(action, task, instance, shown)
        outcome = NOTICES[action] if done else "refused: " + _why_not(action, current, shown)
        log_action(
            action,
            user,
            done,
            "%s by %r on %r / %r (shown version %d): %s",
            action,
            user,
            task,
            instance,
            shown,
            outcome,
            task_name=task,
            instance_id=instance,
            shown_version=shown,
        )
        if done:
            return back_to(request, form.get("back"), action)
        if current is None:
            raise HTTPException(404, "There is no such execution any more; nothing was done.")
        raise HTTPException(409, f"Nothing was done: {_why_not(action, current, shown)}.")


def _listing_params(request: Request, page_size: int) -> Listing:
    """The listing a request asks for; a 400 naming the parameter when it is wrong."""
    return execution_listing(request.query_params, page_size)


def _key_params(request: Request) -> tuple[str, str]:
    """The task name and instance id of a request for one execution."""
    task = request.query_params.get("task")
    instance = request.query_params.get("instance")
    if not task or instance is None:
        raise HTTPException(400, "task and instance are required")
    return task, instance


def _why_not(action: str, current: Execution | None, shown: int) -> str:
    if current is None:
        return "the execution no longer exists"
    if action == "cancel" and current.stop_requested_at is not None:
        return f"{current.picked_by} was asked to stop the execution already"
    if current.picked and action != "cancel":
        return f"a scheduler ({current.picked_by}) is running the execution now"
    if action != "delete" and current.waiting:
        return (
            f"the execution is the callback of group {current.awaits} and waits for its "
            "members: it becomes due when the last of them finishes"
        )
    return (
        f"the execution changed since the page showed it "
        f"(version {shown} was shown, it is now at {current.version})"
    )
