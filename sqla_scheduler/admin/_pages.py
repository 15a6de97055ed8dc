"""What every page of one admin app shares: the scheduler and its reads, the templates and
how a page is rendered, the checks of query parameters and action forms, and error pages.

The handlers live by subject (``_app`` for executions, ``_history`` for the history
table, ``_results`` and ``_groups``), each over one ``Pages``. Links are built from the
ASGI ``root_path``, so the app works wherever it is mounted.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import jinja2
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from sqla_scheduler._console import Console
from sqla_scheduler._execution import EXECUTION_SORTS
from sqla_scheduler._limits import BIGINT_MAX
from sqla_scheduler.admin._listings import HistoryListing, Listing, Paging
from sqla_scheduler.admin._reads import Reads
from sqla_scheduler.admin._security import USER_KEY, csrf_token, csrf_valid
from sqla_scheduler.admin._views import (
    PREVIEW_CHARS,
    RESULT_PREVIEW_CHARS,
    STATES,
    elapsed,
    relative,
)
from sqla_scheduler.models import MAX_INSTANCE_ID_LENGTH, MAX_TASK_NAME_LENGTH
from sqla_scheduler.scheduler import Scheduler

__all__ = [
    "HERE",
    "MAX_PAGE_SIZE",
    "NOTICES",
    "Handlers",
    "Pages",
    "answer",
    "app_path",
    "back_to",
    "execution_listing",
    "found_json",
    "found_params",
    "known_names",
    "log_action",
    "logger",
    "offered_bulk",
    "page_json",
    "page_params",
    "positive_int",
    "refusing_nul",
    "text_param",
    "time_param",
]

logger = logging.getLogger("sqla_scheduler.admin")

HERE = Path(__file__).parent
MAX_PAGE_SIZE = 500
_MAX_FORM_BYTES = 16 * 1024
_REFRESH_RANGE = (2, 3600)
#: What each action did, in words for the log and the confirmation ("Done: ...").
NOTICES = {
    "run-now": "the execution was rescheduled to now",
    "retry": "the execution was rescheduled to now for a retry",
    "delete": "the execution was deleted",
    "cancel": (
        "the execution was cancelled (a running one is asked to stop, and ends cancelled "
        "once the process running it has stopped it)"
    ),
    "requeue": "the execution was requeued: scheduled again, due now",
    "pause": "the task was paused: no scheduler picks its executions until it is resumed",
    "resume": "the task was resumed: its due executions run now",
    "bulk-retry": "{n} executions were rescheduled to now for a retry",
    "bulk-delete": "{n} executions were deleted",
    "bulk-cancel": "{n} running executions were asked to stop: each ends cancelled",
    "bulk-pause": "the task was paused: no scheduler picks its executions until it is resumed",
    "bulk-requeue": "{n} dead letters were requeued: scheduled again, due now",
    "cancel-group": (
        "the group was cancelled: its members that were not running and its callback "
        "(along a chain, every later link) were cancelled"
    ),
}


class Pages:
    """The parts of one admin app that its handlers share."""

    def __init__(
        self, scheduler: Scheduler, *, actions: bool, secret: bytes, page_size: int
    ) -> None:
        self.scheduler = scheduler
        self.console = Console(
            scheduler, preview=PREVIEW_CHARS, result_preview=RESULT_PREVIEW_CHARS
        )
        self.reads = Reads(scheduler, self.console)
        self.actions = actions
        self.secret = secret
        self.page_size = page_size
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters["when"] = _when
        self.templates.filters["relative"] = relative
        self.templates.filters["elapsed"] = elapsed
        self.templates.filters["number"] = "{:,}".format
        self.templates.filters["input_time"] = _input_time
        self.templates.globals["descending_first"] = DESCENDING_FIRST

    def render(
        self, request: Request, template: str, context: Mapping[str, Any], status: int = 200
    ) -> HTMLResponse:
        """``template`` rendered with ``context`` and what every page has."""
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
            return root + app_path(request, query=False) + ("?" + query if query else "")

        user = request.scope.get(USER_KEY, "")
        html = self.templates.get_template(template).render(
            {
                "request_path": app_path(request),
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
                "notice": _notice(request),
                **context,
            }
        )
        return HTMLResponse(html, status_code=status)

    async def checked_form(self, request: Request, action: str) -> tuple[str, dict[str, str]]:
        """The signed-in user and the form of an action's POST; a 403 when its CSRF token
        is missing or wrong."""
        user: str = request.scope.get(USER_KEY, "")
        form = await _read_form(request)
        if not csrf_valid(self.secret, user, form.get("csrf")):
            logger.warning("refused %s by %r: missing or wrong CSRF token", action, user)
            raise HTTPException(403, "The form's token is missing or wrong; reload the page.")
        return user, form

    async def http_error(self, request: Request, exc: Exception) -> Response:
        """Errors as JSON under ``/api``, as a page elsewhere."""
        assert isinstance(exc, HTTPException)
        headers = dict(exc.headers or {})
        if app_path(request).startswith("/api/"):
            return JSONResponse({"error": exc.detail}, status_code=exc.status_code, headers=headers)
        return self.render(
            request,
            "message.html",
            {"status": exc.status_code, "message": exc.detail, "counts": None},
            status=exc.status_code,
        )


class Handlers:
    """The request handlers of one subject, over the ``Pages`` of their app: what they
    read through its ``reads``, what they do through its console's ``actions``."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.scheduler = pages.scheduler
        self.reads = pages.reads
        self.actions = pages.console.actions


def log_action(action: str, user: str, done: bool, message: str, *args: Any, **fields: Any) -> None:
    """Log ``action`` of ``user``: ``message`` with ``args`` for people, and the same as
    fields for machines (``admin_user``, ``admin_action``, ``fields`` and ``done``)."""
    extra = {"admin_user": user, "admin_action": action, **fields, "done": done}
    logger.info(message, *args, extra=extra)


def answer(
    request: Request, back: str | None, action: str, *, done: bool, why: str, missing: bool
) -> RedirectResponse:
    """The answer to an action: back to the page it came from when it was ``done`` (see
    ``back_to``), else a 404 (``missing``: what it acts on is not there) or a 409 saying
    ``why`` nothing was done."""
    if done:
        return back_to(request, back, action)
    raise HTTPException(404 if missing else 409, f"Nothing was done: {why}.")


def page_json(listing: Paging, found: Mapping[str, Any]) -> dict[str, Any]:
    """What a JSON listing says of its page: which, of how many rows, how many pages
    there are and how many rows in all."""
    return {
        "page": listing.page,
        "per_page": listing.per_page,
        "pages": found["pages"],
        "total": found["total"],
    }


def back_to(request: Request, back: str | None, action: str) -> RedirectResponse:
    """The answer to an action that was done: back to the page it came from (``back``, if
    it is a page of this app), which confirms it."""
    root = request.scope.get("root_path", "")
    return RedirectResponse(root + _with_done(_safe_back(back), action), status_code=303)


def text_param(q: Mapping[str, str], name: str, max_length: int) -> str | None:
    """The query parameter ``name`` (``None`` when absent or empty); a 400 when it is
    longer than ``max_length``."""
    value = q.get(name) or None
    if value is not None and len(value) > max_length:
        raise HTTPException(400, f"{name} is longer than {max_length} characters")
    return value


#: The longest error text a filter looks for (the first line of an error is what a page
#: shows, so a longer one would find nothing it can show).
MAX_ERROR_FILTER = 200
#: The sort keys whose first click sorts from the largest value: times and counts, where
#: the latest or the most is what is looked for.
DESCENDING_FIRST = frozenset({"last_failure", "failures", "priority", "finished", "attempt"})


def time_param(q: Mapping[str, str], name: str) -> datetime | None:
    """The query parameter ``name`` as an aware time (``None`` when absent or empty): ISO
    8601, such as a ``datetime-local`` input sends (``2030-05-17T12:00``), read as UTC
    when it names no offset; a 400 naming the parameter and the value otherwise."""
    raw = q.get(name) or None
    if raw is None:
        return None
    try:
        if len(raw) > 40:
            raise ValueError(raw)
        value = datetime.fromisoformat(raw)
    except ValueError:
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise HTTPException(
            400,
            f"{name} must be an ISO 8601 date and time, such as 2030-05-17T12:00 (read as "
            f"UTC without an offset), got {shown!r}",
        ) from None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def found_params(q: Mapping[str, str], sorts: Collection[str]) -> dict[str, Any]:
    """A listing's ``error``, ``since``, ``until``, ``sort`` (one of ``sorts``) and ``dir``
    (``asc`` or ``desc``; by default the sort key's first direction, see
    ``DESCENDING_FIRST``), as ``Found`` takes them; a 400 naming the parameter when one
    is wrong."""
    since, until = time_param(q, "since"), time_param(q, "until")
    if since is not None and until is not None and until <= since:
        raise HTTPException(
            400, f"until ({until.isoformat()}) must be after since ({since.isoformat()})"
        )
    sort = q.get("sort") or None
    if sort is not None and sort not in sorts:
        raise HTTPException(
            400, f"sort must be one of {', '.join(sorts)} (or empty), got {sort[:40]!r}"
        )
    direction = q.get("dir") or None
    if direction is not None and direction not in ("asc", "desc"):
        raise HTTPException(400, f"dir must be asc or desc, got {direction[:40]!r}")
    if sort is None:
        direction = None
    elif direction is None:
        direction = "desc" if sort in DESCENDING_FIRST else "asc"
    return {
        "error": text_param(q, "error", MAX_ERROR_FILTER),
        "since": since,
        "until": until,
        "sort": sort,
        "dir": direction,
    }


def execution_listing(q: Mapping[str, str], page_size: int) -> Listing:
    """The execution listing the query ``q`` asks for (a request's, or the filter a bulk
    action's form carries); a 400 naming the parameter when it is wrong."""
    state = q.get("state") or "all"
    if state not in STATES:
        raise HTTPException(400, f"state must be one of {', '.join(STATES)}")
    page, per_page = page_params(q, page_size)
    return Listing(
        state=state,  # type: ignore[arg-type]  # checked against STATES above
        task=text_param(q, "task", MAX_TASK_NAME_LENGTH),
        instance=text_param(q, "instance", MAX_INSTANCE_ID_LENGTH),
        page=page,
        per_page=per_page,
        **found_params(q, EXECUTION_SORTS),
    )


def offered_bulk(listing: Any, registered: Collection[str]) -> list[tuple[str, str]]:
    """The bulk actions a listing's page offers for its filter, ``(action, label)``:
    requeue on the dead letters; retry (of the failing), delete, cancel (of the running)
    and, when the filter names a registered task, pause on the executions."""
    if isinstance(listing, HistoryListing):
        return [("requeue", "Requeue all")] if listing.dead_letters else []
    offered: list[tuple[str, str]] = []
    if listing.state in ("all", "failing"):
        offered.append(("retry", "Retry the failing ones"))
    if listing.state != "running":
        offered.append(("delete", "Delete all"))
    if listing.state in ("all", "running"):
        offered.append(("cancel", "Cancel the running ones"))
    if listing.task in registered:
        offered.append(("pause", f"Pause {listing.task}"))
    return offered


def found_json(listing: Any) -> dict[str, Any]:
    """What a JSON listing says it found by beyond task, instance and outcome."""
    return {
        "error": listing.error,
        "since": None if listing.since is None else listing.since.isoformat(),
        "until": None if listing.until is None else listing.until.isoformat(),
        "sort": listing.sort,
        "dir": listing.dir,
    }


def known_names(registered: Collection[str], seen: Collection[str]) -> list[str]:
    """The task names a listing's filter offers: those registered here and those its
    table holds (an orphan's, another application's), sorted."""
    return sorted({*registered, *seen})


def page_params(q: Mapping[str, str], page_size: int) -> tuple[int, int]:
    """A listing's ``page`` and ``per_page`` (at most ``MAX_PAGE_SIZE``); the page's rows
    start at an offset a bigint holds."""
    page = positive_int(q.get("page"), "page", default=1, high=BIGINT_MAX // MAX_PAGE_SIZE)
    per_page = positive_int(q.get("per_page"), "per_page", default=page_size)
    if per_page > MAX_PAGE_SIZE:
        raise HTTPException(400, f"per_page must be at most {MAX_PAGE_SIZE}")
    return page, per_page


def positive_int(raw: str | None, name: str, *, default: int | None, high: int = BIGINT_MAX) -> int:
    """``raw`` as a whole number from 1 to ``high``, in ASCII digits (``int()`` also reads
    other scripts' digits); ``default`` when absent (required if None)."""
    if raw is None or raw == "":
        if default is None:
            raise HTTPException(400, f"{name} is required")
        return default
    digits = raw.lstrip("0")  # int() refuses more than 4300 digits
    if (
        not (raw.isascii() and raw.isdigit())
        or len(digits) > 19
        or not 1 <= int(digits or 0) <= high
    ):
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise HTTPException(
            400, f"{name} must be a positive whole number of at most {high}, got {shown!r}"
        )
    return int(digits)


def refusing_nul(
    endpoint: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """``endpoint``, answering 400 to a query with a NUL character (no database stores one
    in text, so no execution can match it)."""

    async def checked(request: Request) -> Response:
        if any("\x00" in k or "\x00" in v for k, v in request.query_params.multi_items()):
            raise HTTPException(400, "A query parameter contains a NUL character.")
        return await endpoint(request)

    return checked


def app_path(request: Request, *, query: bool = True) -> str:
    """The request's path within this app (without the mount point) and its query."""
    path: str = request.scope["path"]
    root: str = request.scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :] or "/"
    if not query:
        return path
    query_string = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "done"])
    return path + ("?" + query_string if query_string else "")


def _when(value: datetime | None) -> str:
    if value is None:
        return "—"
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _notice(request: Request) -> str | None:
    """What the action that led here did (``done``), with how many rows it changed
    (``n``) for a bulk action."""
    q = request.query_params
    notice = NOTICES.get(q.get("done", ""))
    if notice is None or "{n}" not in notice:
        return notice
    n = q.get("n", "")
    return notice.format(n=f"{int(n):,}" if n.isdigit() and len(n) <= 6 else "The")


def _input_time(value: datetime | None) -> str:
    """``value`` as a ``datetime-local`` input holds it, in UTC (empty for none)."""
    if value is None:
        return ""
    return value.astimezone(timezone.utc).replace(tzinfo=None).isoformat(timespec="seconds")


def _refresh(request: Request) -> int | None:
    raw = request.query_params.get("refresh", "")
    if not raw.isdigit() or len(raw) > 6:
        return None
    low, high = _REFRESH_RANGE
    return min(max(int(raw), low), high)


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
    form = dict(parse_qsl(text, keep_blank_values=True))
    if any("\x00" in k or "\x00" in v for k, v in form.items()):
        raise HTTPException(400, "A form field contains a NUL character.")
    return form
