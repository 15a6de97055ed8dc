"""The admin page's groups (``Scheduler.schedule_group``, a chain's links): the newest
groups with their progress, one group with its callback and its finished members, and
the cancel action, as ``Scheduler.cancel_group`` does it.

A group's progress is its row's count (``total``, ``remaining``), read as it stands; its
members' outcomes are counted from the kept results, which are pruned after
``result_retention``, so an old group may have finished members no longer counted by
outcome. The members' values are shown as previews, as on the results page.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sqla_scheduler.admin._listings import GroupListing, MemberListing
from sqla_scheduler.admin._pages import (
    NOTICES,
    Handlers,
    answer,
    log_action,
    page_json,
    page_params,
    positive_int,
    text_param,
)
from sqla_scheduler.models import MAX_TASK_NAME_LENGTH

__all__ = ["GroupPages"]


class GroupPages(Handlers):
    """The request handlers of the groups pages, their JSON twins and cancel."""

    async def listing(self, request: Request) -> Response:
        """One page of groups, newest first, filtered by their callback's task name."""
        listing = _listing_params(request, self.pages.page_size)
        found = await self.reads.groups(listing)
        return self.pages.render(
            request,
            "groups.html",
            {
                **found,
                "listing": listing,
                "path": "/groups",
                "task_names": sorted(self.scheduler.tasks),
                "page_name": "groups",
            },
        )

    async def one(self, request: Request) -> Response:
        """One group: its progress, its callback, and a page of its finished members."""
        listing = _member_params(request, self.pages.page_size)
        found = await self.reads.group(listing)
        if found["group"] is None:
            raise HTTPException(404, f"There is no group {listing.group_id}.")
        return self.pages.render(
            request,
            "group.html",
            {
                **found,
                "listing": listing,
                "path": f"/groups/{listing.group_id}",
                "retention": self.scheduler.config.result_retention,
                "page_name": "groups",
            },
        )

    async def api_listing(self, request: Request) -> Response:
        """One page of groups as JSON."""
        listing = _listing_params(request, self.pages.page_size)
        found = await self.reads.groups(listing)
        return JSONResponse(
            {
                "task": listing.task,
                **page_json(listing, found),
                "groups": [v.to_json() for v in found["groups"]],
            }
        )

    async def api_one(self, request: Request) -> Response:
        """One group as JSON, with its callback and a page of its finished members."""
        listing = _member_params(request, self.pages.page_size)
        found = await self.reads.group(listing)
        if found["group"] is None:
            raise HTTPException(404, f"There is no group {listing.group_id}.")
        return JSONResponse(
            {
                **found["group"].to_json(),
                "page": listing.page,
                "per_page": listing.per_page,
                "pages": found["pages"],
                "members_listed": found["total"],
                "members": [v.to_json() for v in found["members"]],
            }
        )

    async def cancel(self, request: Request) -> Response:
        """Cancel a group as ``Scheduler.cancel_group`` does: its members that are not
        running and its callback (along a chain, every link after it)."""
        user, form = await self.pages.checked_form(request, "cancel-group")
        group_id = positive_int(form.get("id"), "id", default=None)
        group, cancelled = await self.actions.cancel_group(group_id)
        done = cancelled is not None
        if group is None:
            why = f"there is no group {group_id}"
        elif not done:
            why = f"group {group_id} was cancelled already"
        else:
            why = ""
        task_name = None if group is None else group.task_name
        instance_id = None if group is None else group.instance_id
        log_action(
            "cancel-group",
            user,
            done,
            "cancel-group by %r of group %d (callback %r / %r): %s",
            user,
            group_id,
            task_name,
            instance_id,
            f"{NOTICES['cancel-group']} ({cancelled} executions)" if done else "refused: " + why,
            group_id=group_id,
            task_name=task_name,
            instance_id=instance_id,
            cancelled=cancelled,
        )
        back = form.get("back")
        return answer(request, back, "cancel-group", done=done, why=why, missing=group is None)


def _listing_params(request: Request, page_size: int) -> GroupListing:
    """The groups listing a request asks for; a 400 naming the parameter when it is wrong."""
    q = request.query_params
    page, per_page = page_params(q, page_size)
    return GroupListing(
        task=text_param(q, "task", MAX_TASK_NAME_LENGTH), page=page, per_page=per_page
    )


def _member_params(request: Request, page_size: int) -> MemberListing:
    """The group and the page of its members a request asks for; a 400 naming what is
    wrong (the group's id is in the path)."""
    group_id = positive_int(request.path_params["group_id"], "group id", default=None)
    page, per_page = page_params(request.query_params, page_size)
    return MemberListing(group_id=group_id, page=page, per_page=per_page)
