"""The admin page's history: the entries of finished attempts, the dead letters among them
(abandoned and undecodable entries, which keep their payload), one entry in full, and the
requeue action.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sqla_scheduler._history_entry import HISTORY_SORTS, REQUEUEABLE
from sqla_scheduler.admin._listings import HistoryListing
from sqla_scheduler.admin._pages import (
    NOTICES,
    Handlers,
    answer,
    found_json,
    found_params,
    known_names,
    log_action,
    offered_bulk,
    page_json,
    page_params,
    positive_int,
    text_param,
)
from sqla_scheduler.history import OUTCOMES, HistoryEntry
from sqla_scheduler.models import MAX_INSTANCE_ID_LENGTH, MAX_TASK_NAME_LENGTH

__all__ = ["HistoryPages", "history_listing"]


class HistoryPages(Handlers):
    """The request handlers of the history pages and of requeue."""

    async def listing(self, request: Request) -> Response:
        """One page of history entries, newest first, filtered by task, instance and outcome."""
        return await self._listing(request, dead_letters=False)

    async def dead_letters(self, request: Request) -> Response:
        """One page of the abandoned and undecodable entries, newest first."""
        return await self._listing(request, dead_letters=True)

    async def _listing(self, request: Request, *, dead_letters: bool) -> Response:
        listing = _listing_params(request, self.pages.page_size, dead_letters=dead_letters)
        found = await self.reads.history(listing)
        config = self.scheduler.config
        return self.pages.render(
            request,
            "history.html",
            {
                **found,
                "listing": listing,
                "path": "/dead-letters" if dead_letters else "/history",
                "outcomes": REQUEUEABLE if dead_letters else OUTCOMES,
                "task_names": known_names(self.scheduler.tasks, found["seen_tasks"]),
                "sorts": HISTORY_SORTS,
                "bulk_actions": offered_bulk(listing, self.scheduler.tasks),
                "history_setting": config.history,
                "retention": config.history_retention,
                "page_name": "dead-letters" if dead_letters else "history",
            },
        )

    async def entry(self, request: Request) -> Response:
        """One history entry: its error and (for a dead letter) its payload in full."""
        history_id = positive_int(request.query_params.get("id"), "id", default=None)
        header, view, current = await self.reads.entry(history_id)
        if view is None:
            raise HTTPException(404, f"There is no history entry {history_id} (it may be pruned).")
        return self.pages.render(request, "entry.html", {**header, "h": view, "current": current})

    async def api_listing(self, request: Request) -> Response:
        """One page of history entries as JSON."""
        return await self._api_listing(request, dead_letters=False)

    async def api_dead_letters(self, request: Request) -> Response:
        """One page of the dead letters as JSON."""
        return await self._api_listing(request, dead_letters=True)

    async def _api_listing(self, request: Request, *, dead_letters: bool) -> Response:
        listing = _listing_params(request, self.pages.page_size, dead_letters=dead_letters)
        found = await self.reads.history(listing)
        return JSONResponse(
            {
                "task": listing.task,
                "instance": listing.instance,
                "instance_contains": listing.instance_contains,
                "outcome": listing.outcome,
                "outcomes": list(listing.outcomes or OUTCOMES),
                **found_json(listing),
                **page_json(listing, found),
                "entries": [v.to_json() for v in found["entries"]],
            }
        )

    async def api_entry(self, request: Request) -> Response:
        """One history entry as JSON, its error and payload in full."""
        history_id = positive_int(request.query_params.get("id"), "id", default=None)
        _, view, current = await self.reads.entry(history_id)
        if view is None:
            raise HTTPException(404, f"There is no history entry {history_id} (it may be pruned).")
        return JSONResponse({**view.to_json(), "in_table": current is not None})

    async def requeue(self, request: Request) -> Response:
        """Schedule a dead letter's execution again, due now, with its payload."""
        user, form = await self.pages.checked_form(request, "requeue")
        history_id = positive_int(form.get("id"), "id", default=None)
        done, entry, in_table = await self.actions.requeue(history_id)
        why = "" if done else _why_not(history_id, entry, in_table)
        task_name = None if entry is None else entry.task_name
        instance_id = None if entry is None else entry.instance_id
        log_action(
            "requeue",
            user,
            done,
            "requeue by %r of history entry %d (%r / %r): %s",
            user,
            history_id,
            task_name,
            instance_id,
            NOTICES["requeue"] if done else "refused: " + why,
            history_id=history_id,
            task_name=task_name,
            instance_id=instance_id,
        )
        return answer(
            request, form.get("back"), "requeue", done=done, why=why, missing=entry is None
        )


def _listing_params(request: Request, page_size: int, *, dead_letters: bool) -> HistoryListing:
    """The history listing a request asks for; a 400 naming the parameter when it is wrong."""
    return history_listing(request.query_params, page_size, dead_letters=dead_letters)


def history_listing(q: Mapping[str, str], page_size: int, *, dead_letters: bool) -> HistoryListing:
    """The history listing the query ``q`` asks for (a request's, or the filter a bulk
    requeue's form carries); a 400 naming the parameter when it is wrong."""
    allowed = REQUEUEABLE if dead_letters else OUTCOMES
    outcome = q.get("outcome") or None
    if outcome is not None and outcome not in allowed:
        raise HTTPException(
            400,
            ("for dead letters, " if dead_letters else "")
            + f"outcome must be one of {', '.join(allowed)} (or empty for all)",
        )
    page, per_page = page_params(q, page_size)
    return HistoryListing(
        dead_letters=dead_letters,
        task=text_param(q, "task", MAX_TASK_NAME_LENGTH),
        instance=text_param(q, "instance", MAX_INSTANCE_ID_LENGTH),
        outcome=outcome,  # type: ignore[arg-type]  # checked against OUTCOMES above
        instance_contains=text_param(q, "instance_contains", MAX_INSTANCE_ID_LENGTH),
        page=page,
        per_page=per_page,
        **found_params(q, HISTORY_SORTS),
    )


def _why_not(history_id: int, entry: HistoryEntry | None, in_table: bool) -> str:
    if entry is None:
        return f"there is no history entry {history_id} (it may be pruned)"
    if entry.outcome not in REQUEUEABLE:
        return (
            f"entry {history_id} is {entry.outcome}; only abandoned and undecodable entries "
            "(dead letters) can be requeued"
        )
    if in_table:
        return (
            f"an execution of {entry.task_name} / {entry.instance_id} is in the table "
            "already (requeued before, or scheduled again)"
        )
    return f"an execution of {entry.task_name} / {entry.instance_id} was in the table"
