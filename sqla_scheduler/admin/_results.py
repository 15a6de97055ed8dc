"""The admin page's kept results: the final outcome of each execution of a task defined
with ``keep_result=True``, newest first, with a preview of what its handler returned.

Only previews: a value may weigh up to ``max_result_size`` (64KB by default), and a page
of them would weigh megabytes; ``Scheduler.result`` and ``sqla-scheduler result`` read one
whole.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sqla_scheduler._result import RESULT_OUTCOMES, RESULT_SORTS
from sqla_scheduler.admin._listings import ResultListing
from sqla_scheduler.admin._pages import (
    Handlers,
    found_json,
    found_params,
    known_names,
    page_json,
    page_params,
    text_param,
)
from sqla_scheduler.models import MAX_INSTANCE_ID_LENGTH, MAX_TASK_NAME_LENGTH
from sqla_scheduler.tasks import OneTimeTask

__all__ = ["ResultPages"]


class ResultPages(Handlers):
    """The request handlers of the results listing and its JSON twin."""

    async def listing(self, request: Request) -> Response:
        """One page of kept results, newest first, filtered by task, instance and outcome."""
        listing = _listing_params(request, self.pages.page_size)
        found = await self.reads.results(listing)
        tasks = self.scheduler.tasks
        keeping = sorted(
            name
            for name, task in tasks.items()
            if isinstance(task, OneTimeTask) and task.keep_result
        )
        return self.pages.render(
            request,
            "results.html",
            {
                **found,
                "listing": listing,
                "path": "/results",
                "outcomes": RESULT_OUTCOMES,
                # the registered tasks that keep results, and those that kept some
                "keeping": keeping,
                "task_names": known_names(keeping, found["seen_tasks"]),
                "sorts": RESULT_SORTS,
                "retention": self.scheduler.config.result_retention,
                "page_name": "results",
            },
        )

    async def api_listing(self, request: Request) -> Response:
        """One page of kept results as JSON."""
        listing = _listing_params(request, self.pages.page_size)
        found = await self.reads.results(listing)
        return JSONResponse(
            {
                "task": listing.task,
                "instance": listing.instance,
                "instance_contains": listing.instance_contains,
                "outcome": listing.outcome,
                **found_json(listing),
                **page_json(listing, found),
                "results": [v.to_json() for v in found["results"]],
            }
        )


def _listing_params(request: Request, page_size: int) -> ResultListing:
    """The results listing a request asks for; a 400 naming the parameter when it is wrong."""
    q = request.query_params
    outcome = q.get("outcome") or None
    if outcome is not None and outcome not in RESULT_OUTCOMES:
        raise HTTPException(
            400, f"outcome must be one of {', '.join(RESULT_OUTCOMES)} (or empty for all)"
        )
    page, per_page = page_params(q, page_size)
    return ResultListing(
        task=text_param(q, "task", MAX_TASK_NAME_LENGTH),
        instance=text_param(q, "instance", MAX_INSTANCE_ID_LENGTH),
        outcome=outcome,  # checked against RESULT_OUTCOMES above
        instance_contains=text_param(q, "instance_contains", MAX_INSTANCE_ID_LENGTH),
        page=page,
        per_page=per_page,
        **found_params(q, RESULT_SORTS),
    )
