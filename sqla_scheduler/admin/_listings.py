"""What a listing page is asked for: its filter and its page, as read from the query
string and written back into its links; each gives the console the filter it reads by."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from sqla_scheduler._console import (
    ExecutionFilter,
    Finding,
    HistoryFilter,
    ResultFilter,
)
from sqla_scheduler._execution import ExecutionState
from sqla_scheduler._history_entry import REQUEUEABLE, Outcome
from sqla_scheduler._result import ResultOutcome

__all__ = [
    "Found",
    "GroupListing",
    "HistoryListing",
    "Listing",
    "MemberListing",
    "Paging",
    "ResultListing",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Paging:
    """A listing request's page: which one, of how many rows; ``QUERIED`` names the
    fields its links carry in their query string, before the page."""

    QUERIED: ClassVar[tuple[str, ...]] = ()

    page: int
    per_page: int

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per_page

    def query(self, **changes: Any) -> dict[str, Any]:
        """The query string of this page's link, with ``changes`` (another page, say)."""
        params = {name: _query_value(getattr(self, name)) for name in self.QUERIED}
        return {**params, "page": self.page, **changes}


def _query_value(value: Any) -> Any:
    # a time goes into a link as the ISO 8601 text it was read from
    return value.isoformat() if isinstance(value, datetime) else value


#: The query parameters of a listing's filter that ``Found`` adds, in its links' order.
FOUND_QUERIED = ("error", "since", "until", "sort", "dir")


@dataclass(frozen=True, slots=True, kw_only=True)
class Found(Paging):
    """A listing request with what finds rows beyond task and instance: ``error`` text in
    the error, a time range (``since`` inclusive, ``until`` exclusive, both aware), and a
    ``sort`` key with its direction ``dir`` (``asc`` or ``desc``; ``None`` for none)."""

    error: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    sort: str | None = None
    dir: str | None = None

    @property
    def descending(self) -> bool:
        """Whether the sort runs from the largest value."""
        return self.dir == "desc"

    @property
    def finding(self) -> Finding:
        """What the statements are given to filter and order by."""
        return Finding(
            error=self.error,
            since=self.since,
            until=self.until,
            sort=self.sort,
            descending=self.descending,
        )

    @property
    def filtered(self) -> bool:
        """Whether any filter of the page is set (its "clear filters" link is shown)."""
        skip = {"state", "sort", "dir"}
        return any(getattr(self, name) for name in self.QUERIED if name not in skip)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultListing(Found):
    """A results listing request: which kept results, which page. ``instance`` matches an
    instance id exactly (the links to one execution's results), ``instance_contains`` any
    that contains it."""

    QUERIED = ("task", "instance", "instance_contains", "outcome", *FOUND_QUERIED)

    task: str | None
    instance: str | None
    outcome: ResultOutcome | None
    instance_contains: str | None = None

    @property
    def filter(self) -> ResultFilter:
        """The results the console reads."""
        return ResultFilter(
            task=self.task,
            instance=self.instance,
            outcome=self.outcome,
            instance_contains=self.instance_contains,
            finding=self.finding,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupListing(Paging):
    """A groups listing request: the groups of which callback task, which page."""

    QUERIED = ("task",)

    task: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberListing(Paging):
    """A group's page: which group, which page of its finished members."""

    QUERIED = ()

    group_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Listing(Found):
    """A listing request: which executions (``instance`` is a substring of the instance
    id; the time range bounds the execution time), which page."""

    QUERIED = ("state", "task", "instance", *FOUND_QUERIED)

    state: ExecutionState
    task: str | None
    instance: str | None

    @property
    def filter(self) -> ExecutionFilter:
        """The executions the console reads."""
        return ExecutionFilter(
            state=self.state,
            task=self.task,
            instance_contains=self.instance,
            finding=self.finding,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryListing(Found):
    """A history listing request: which entries (of the dead letters alone, or of all
    history), which page. ``instance`` matches an instance id exactly (the links to one
    execution's entries), ``instance_contains`` any that contains it; the time range
    bounds the finish time."""

    QUERIED = ("task", "instance", "instance_contains", "outcome", *FOUND_QUERIED)

    dead_letters: bool
    task: str | None
    instance: str | None
    outcome: Outcome | None
    instance_contains: str | None = None

    @property
    def outcomes(self) -> tuple[str, ...] | None:
        """The outcomes listed; ``None`` for all of them."""
        if self.outcome is not None:
            return (self.outcome,)
        return REQUEUEABLE if self.dead_letters else None

    @property
    def filter(self) -> HistoryFilter:
        """The entries the console reads."""
        return HistoryFilter(
            task=self.task,
            instance=self.instance,
            outcomes=self.outcomes,
            instance_contains=self.instance_contains,
            finding=self.finding,
        )
