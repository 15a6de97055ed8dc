"""The admin page's bulk actions: retry, delete, cancel (the running) or pause what an
execution listing's filter selects, requeue what a dead letters listing's filter selects.

Each is two requests. A GET of ``/bulk/ACTION`` with the listing's filter shows how many
rows the action would change and a form to confirm; the form's POST carries the filter
and that count, and the action is done only if the filter still selects exactly that
many (else nothing is done and the answer says what changed). The POST is CSRF-checked
and logged as the single actions are, and is bounded: at most ``MAX_BULK`` rows per
request, changed ``_store.bulk.BATCH`` at a time in one transaction; a filter that
selects more is refused, to be narrowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from sqla_scheduler._console import MAX_BULK, AlreadyPaused
from sqla_scheduler.admin._history import history_listing
from sqla_scheduler.admin._listings import Found, HistoryListing, Listing
from sqla_scheduler.admin._pages import Handlers, execution_listing, log_action, positive_int

__all__ = ["BULK_ACTIONS", "MAX_BULK", "BulkActions"]


@dataclass(frozen=True, slots=True)
class _Action:
    #: What the confirmation says will happen to the rows: "N executions will be ...".
    will: str
    #: What the notice says was done.
    done: str
    #: The button's label.
    label: str
    #: Whether it acts on the dead letters (else on the executions).
    dead_letters: bool = False


BULK_ACTIONS: dict[str, _Action] = {
    "retry": _Action(
        will="rescheduled to now for a retry",
        done="rescheduled to now for a retry",
        label="Retry",
    ),
    "delete": _Action(will="deleted", done="deleted", label="Delete"),
    "cancel": _Action(
        will=(
            "asked to stop: the processes running them stop them, and each ends cancelled "
            "(a handler still running cancel_grace later is recorded cancelled anyway)"
        ),
        done="asked to stop",
        label="Cancel",
    ),
    "pause": _Action(
        will="held: no scheduler picks them until the task is resumed",
        done="held: the task was paused",
        label="Pause task",
    ),
    "requeue": _Action(
        will="requeued: scheduled again, due now, with their payload",
        done="requeued",
        label="Requeue",
        dead_letters=True,
    ),
}


class BulkActions(Handlers):
    """The request handlers of the bulk actions' confirmations and POSTs."""

    def _action(self, request: Request) -> tuple[str, _Action]:
        name = request.path_params["action"]
        action = BULK_ACTIONS.get(name)
        if action is None:
            raise HTTPException(404, f"There is no bulk action {name[:40]!r}.")
        return name, action

    def _listing(self, q: Mapping[str, str], action: _Action) -> Listing | HistoryListing:
        if action.dead_letters:
            return history_listing(q, self.pages.page_size, dead_letters=True)
        return execution_listing(q, self.pages.page_size)

    def _check(self, name: str, listing: Listing | HistoryListing) -> None:
        if name == "pause":
            assert isinstance(listing, Listing)
            if listing.task is None:
                raise HTTPException(400, "Pausing by filter needs a task: choose one first.")
            if listing.task not in self.scheduler.tasks:
                raise HTTPException(404, f"No task {listing.task!r} is registered here.")

    async def confirm(self, request: Request) -> Response:
        """How many rows the action would change for the filter, and a form to confirm."""
        name, action = self._action(request)
        listing = self._listing(request.query_params, action)
        self._check(name, listing)
        found = await self.pages.console.reads.bulk_count(name, listing.filter)
        count, paused = found.value
        return self.pages.render(
            request,
            "bulk.html",
            {
                **self.reads.shown(found),
                "name": name,
                "action": action,
                "listing": listing,
                "count": count,
                "max_bulk": MAX_BULK,
                "already_paused": name == "pause" and listing.task in paused,
                "fields": _fields(listing),
                "back": "/dead-letters" if action.dead_letters else "/executions",
                "page_name": "bulk",
            },
        )

    async def act(self, request: Request) -> Response:
        """Do the action on what the filter selects, if it still selects as many rows as
        the confirmation showed."""
        name, action = self._action(request)
        user, form = await self.pages.checked_form(request, "bulk-" + name)
        listing = self._listing(form, action)
        self._check(name, listing)
        shown = positive_int(form.get("count"), "count", default=None, high=MAX_BULK)
        try:
            done, selected = await self.actions.bulk(name, listing.filter, shown)
        except AlreadyPaused:
            raise HTTPException(
                409, f"Nothing was done: {listing.task!r} is paused already."
            ) from None
        filters = listing.query(page=None)
        filters = {k: v for k, v in filters.items() if v is not None and k not in ("sort", "dir")}
        outcome = (
            f"{done} {'dead letters' if action.dead_letters else 'executions'} {action.done}"
            if done is not None
            else f"refused: the filter selects {selected} now"
        )
        log_action(
            "bulk-" + name,
            user,
            done is not None,
            "bulk %s by %r of %d shown, filter %r: %s",
            name,
            user,
            shown,
            filters,
            outcome,
            filter=filters,
            shown_count=shown,
            selected_count=selected,
            done_count=done,
        )
        if done is None:
            raise HTTPException(409, _changed(shown, selected))
        root = request.scope.get("root_path", "")
        path = _listing_path(listing)
        joiner = "&" if "?" in path else "?"
        return RedirectResponse(f"{root}{path}{joiner}done=bulk-{name}&n={done}", status_code=303)


def _changed(shown: int, selected: int) -> str:
    if selected > MAX_BULK:
        return (
            f"Nothing was done: the filter selects more than {MAX_BULK:,} rows now, the most "
            "one bulk action changes; narrow it (by task, instance, error or time range)."
        )
    return (
        f"Nothing was done: the filter selected {shown:,} when you confirmed and selects "
        f"{selected:,} now. Go back to the list and review what changed before you confirm "
        "again."
    )


def _fields(listing: Found) -> dict[str, str]:
    """The filter as the confirmation's form carries it (no page, no order)."""
    query = listing.query(page=None, sort=None, dir=None)
    return {k: str(v) for k, v in query.items() if v is not None and v != ""}


def _listing_path(listing: Found) -> str:
    """The path and query of the listing a bulk action came from, with its filter."""
    path = "/dead-letters" if isinstance(listing, HistoryListing) else "/executions"
    query = urlencode(_fields(listing))
    return path + ("?" + query if query else "")
