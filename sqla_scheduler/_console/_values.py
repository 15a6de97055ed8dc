"""The values an operator's console reads and is asked for: the filters of its listings,
the header every page shows, a page of a listing, the overview and a group's page."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Generic, TypeVar

from sqla_scheduler._execution import Execution, ExecutionState
from sqla_scheduler._statements.finding import Finding, HistoryFilter, ResultFilter
from sqla_scheduler._statements.listing import ListingFilter
from sqla_scheduler._store.results import Listed
from sqla_scheduler.groups import Group
from sqla_scheduler.nodes import Node

__all__ = [
    "MAX_BULK",
    "SECTION_ROWS",
    "SEEN_NAMES",
    "AlreadyPaused",
    "ExecutionFilter",
    "GroupPage",
    "Header",
    "HistoryFilter",
    "Overview",
    "Page",
    "Previewed",
    "ResultFilter",
    "Shown",
    "page_count",
]

T = TypeVar("T")

#: How many rows of each section the overview reads; the listings page through the rest.
SECTION_ROWS = 10
#: How many task names a listing reads from its table beside the registered ones: a
#: bounded read of the name index however many rows there are.
SEEN_NAMES = 200
#: The most rows one bulk action changes: 10,000 executions change in well under a
#: second on each database, in ten statements of ``_store.bulk.BATCH``.
MAX_BULK = 10_000

#: An execution with the start of its payload's JSON text and of its error.
Previewed = tuple[Execution, str | None, str | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionFilter:
    """Which executions: in ``state``, of ``task``, whose instance id contains
    ``instance_contains``, and what ``finding`` finds (and orders by)."""

    state: ExecutionState
    task: str | None
    instance_contains: str | None
    finding: Finding

    def arguments(self, known: frozenset[str]) -> ListingFilter:
        """The filter as the store takes it, ``known`` being the registered task names."""
        return {
            "state": self.state,
            "task_name": self.task,
            "instance_contains": self.instance_contains,
            "known_tasks": known,
            "finding": self.finding,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Header:
    """What every page's header shows: the executions in each state, the scheduler nodes
    and, read on a replica, how far it lags behind (``None`` on the primary)."""

    counts: dict[str, int]
    nodes: list[Node]
    replica_lag: timedelta | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Shown(Generic[T]):
    """What one page shows, read at ``now`` with its ``header``."""

    now: datetime
    header: Header
    value: T


@dataclass(frozen=True, slots=True, kw_only=True)
class Page(Generic[T]):
    """One page of a listing, read at ``now`` with its ``header``: the ``total`` its filter
    selects, the page's ``rows`` (none past the last) and the task names its table holds
    (``seen``, at most ``SEEN_NAMES``; empty where the listing offers none)."""

    now: datetime
    header: Header
    total: int
    rows: list[T]
    seen: list[str]

    def pages(self, per_page: int) -> int:
        """How many pages of ``per_page`` rows the total makes."""
        return page_count(self.total, per_page)


def page_count(total: int, per_page: int) -> int:
    """How many pages of ``per_page`` rows ``total`` rows make (one when there are none)."""
    return max(1, math.ceil(total / per_page))


@dataclass(frozen=True, slots=True, kw_only=True)
class Overview:
    """The overview: by task, the executions in each state (``task_counts``), the history
    entries since the window by outcome (``outcomes``) and the dead letters; the paused
    tasks, the recurring tasks' executions, and the first rows of the running, failing
    and orphaned executions."""

    now: datetime
    header: Header
    paused: frozenset[str]
    task_counts: dict[str, dict[str, int]]
    outcomes: dict[str, dict[str, int]]
    dead_letters: dict[str, int]
    recurring: dict[str, Execution]
    running: list[Previewed]
    failing: list[Previewed]
    orphaned: list[Previewed]


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupPage:
    """One group (``None`` when there is none), its callback's execution while it waits
    for the group, else its kept result, and one page of its finished members."""

    group: Group | None
    callback: Execution | None
    kept: Listed | None
    members: list[Listed]


class AlreadyPaused(Exception):
    """A bulk pause found its task paused already: nothing was done."""
