"""Rate limits in the database: the starts counted against each rate-limited task.

A pick of a task with ``rate_limit=RateLimit(count, per)``, under the task's lock
(``_store.pick_limited``), sums the starts counted in the task's window
(``<table>_rates``, an entry per pick that took any: how many, and the latest time they
may start), takes at most what is left of ``count``, and counts them with the latest
time they may start: the pick's own time (read under the lock, so after every pick it
must count) plus a ``slack``. An execution that has not started by then is handed back
untouched instead, to be picked again (``Held.start_by``, ``Executor``); its start stays
counted.

Why no window of ``per`` then holds more than ``count`` starts: an entry's starts come
between its pick and its ``start_by``. Of the entries with starts in one window, the last
picked saw all the others when it summed its window, which reaches back a ``window``
(``per`` plus a ``margin``) from its pick: an entry with a start within ``per`` before one
of its own has a ``start_by`` after that. So it took no more than what kept them all
within ``count``. The margin covers the moment between an execution's check against its
``start_by`` and its handler's first line, and the clocks of the processes sharing the
table.

The slack is small (5% of ``per``, 50 ms at most) for executions that start at once (a
worker is free for each), larger (25%, 250 ms at most) for those picked ahead of the
workers, which only a window with room to spare takes: an entry counts for ``window``
plus its slack after its pick, so a window's count each ``per`` is ``count`` times
``per / (per + margin + slack)`` at most: some 91% of it for a 1 s window, over 99% for a
minute's.

A pick that takes a full batch from a window with room to spare counts more ahead
(``credit``), with the same time: the backlog's next picks take them without the lock,
one statement each, until most of the slack has passed (``credit_until``); what is left
then is given back (``give_back``).

The sum reads one range of an index, an entry per pick in the window; entries out of
every window are deleted once there are ``_PRUNE_AT`` of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import Connection

from sqla_scheduler._execution import Execution
from sqla_scheduler._statements import Statements
from sqla_scheduler._statements.rates import Rates

if TYPE_CHECKING:
    from sqla_scheduler.tasks import RateLimit

__all__ = [
    "Rated",
    "Room",
    "count",
    "credit",
    "credit_until",
    "due",
    "give_back",
    "margin",
    "pick",
    "reopens_at",
    "room",
    "slack",
    "window",
]

#: The margin on top of ``per``: a share of it, and at most.
_MARGIN_SHARE, _MAX_MARGIN = 0.05, timedelta(milliseconds=50)
#: The slack of executions that start at once: a share of ``per``, and at most.
_SLACK_SHARE, _MAX_SLACK = 0.05, timedelta(milliseconds=50)
#: The slack of executions picked ahead of the workers: a share of ``per``, and at most.
_AHEAD_SHARE, _MAX_AHEAD = 0.25, timedelta(milliseconds=250)
#: How many entries out of every window a task's may hold before a pick deletes them.
_PRUNE_AT = 100
#: The most starts a pick counts ahead, in batches as large as its own (see ``credit``).
_CREDIT_PICKS = 16
#: How much of their slack the starts counted ahead may be picked in: the rest is for the
#: last of them to reach a worker.
_CREDIT_SHARE = 0.7


def margin(rate: RateLimit) -> timedelta:
    """How much longer than ``per`` a window is: 5% of it, 50 ms at most."""
    return min(rate.per * _MARGIN_SHARE, _MAX_MARGIN)


def window(rate: RateLimit) -> timedelta:
    """How long before a pick the starts it counts may be."""
    return rate.per + margin(rate)


def slack(rate: RateLimit, *, ahead: bool) -> timedelta:
    """How long after its pick an execution may start: 5% of ``per`` (50 ms at most) when
    it starts at once, 25% (250 ms at most) when it was picked ahead of the workers."""
    if ahead:
        return min(rate.per * _AHEAD_SHARE, _MAX_AHEAD)
    return min(rate.per * _SLACK_SHARE, _MAX_SLACK)


def credit(available: int, taken: int) -> int:
    """How many more starts a pick that took a full batch of ``taken`` may count ahead, of
    the ``available`` it may count: half of what is left, at most ``_CREDIT_PICKS``
    batches."""
    return max(0, min((available - taken) // 2, taken * _CREDIT_PICKS))


def credit_until(at: datetime, start_by: datetime) -> datetime:
    """Until when the starts counted at ``at`` to start by ``start_by`` may be picked:
    ``_CREDIT_SHARE`` of the way, so that what is picked then can still start in time."""
    return at + (start_by - at) * _CREDIT_SHARE


@dataclass(frozen=True, slots=True)
class Room:
    """What a pick of one task at ``at`` may count: ``available`` more starts; ``stale``
    entries are out of every window."""

    at: datetime
    available: int
    stale: int


def room(conn: Connection, stmts: Rates, name: str, rate: RateLimit, at: datetime) -> Room:
    """How many starts of the task ``name`` a pick at ``at`` may count (under the task's
    lock)."""
    since = at - window(rate)
    used, stale = conn.execute(stmts.window, {"name": name, "since": since}).one()
    return Room(at, max(0, rate.count - int(used)), int(stale))


def count(
    conn: Connection,
    stmts: Rates,
    name: str,
    rate: RateLimit,
    found: Room,
    n: int,
    start_by: datetime,
) -> int:
    """Count ``n`` starts of the task ``name``, the latest by ``start_by`` (at most
    ``found.available``), and delete its entries out of every window once there are
    ``_PRUNE_AT`` of them. Returns the entry's id."""
    added = conn.execute(stmts.add, {"task_name": name, "start_by": start_by, "starts": n})
    if found.stale >= _PRUNE_AT:
        conn.execute(stmts.prune, {"name": name, "since": found.at - window(rate)})
    key = added.inserted_primary_key
    assert key is not None
    return int(key[0])


def give_back(conn: Connection, statements: Statements, *, entry: int, starts: int) -> None:
    """Count ``starts`` fewer starts in the entry ``entry``: starts counted ahead that no
    pick will take (at any time: fewer starts counted only leave more room)."""
    stmts = statements.rates
    conn.execute(stmts.give_back, {"entry": entry, "fewer": starts})


def reopens_at(
    conn: Connection, stmts: Rates, name: str, rate: RateLimit, at: datetime
) -> datetime | None:
    """When the window of the task ``name``, full at ``at``, has room again: once enough of
    its starts have left it (``None``: it is not full)."""
    span = window(rate)
    entries = conn.execute(stmts.entries, {"name": name, "since": at - span}).all()
    used = sum(starts for _, starts in entries)
    if used < rate.count:
        return None
    for start_by, starts in entries:
        used -= starts
        if used < rate.count:
            reopen: datetime = start_by + span
            return reopen
    return None


@dataclass(frozen=True, slots=True)
class Rated:
    """What a pick of one rate-limited task came to: the executions it ``found``, whether
    that was all that was due (``drained``), by when they must start, the starts counted
    ahead (``credit``: how many, in which entry, until when they may be picked), when its
    full window has room again (``reopen``), and whether due executions of it wait for a
    free worker (``held_back``)."""

    found: list[Execution]
    drained: bool = True
    start_by: datetime | None = None
    credit: tuple[int, int, datetime] | None = None
    reopen: datetime | None = None
    held_back: bool = False


def pick(
    conn: Connection,
    stmts: Rates,
    name: str,
    rate: RateLimit,
    *,
    allowed: int,
    at_once: int,
    concurrent: bool,
    now: datetime,
    clock: Callable[[], datetime] | None,
    take: Callable[..., list[Execution]],
) -> Rated:
    """Pick up to ``allowed`` due executions of the task ``name`` (``take(limit=n)``) that
    its window has room for, under the task's lock, and count their starts.

    The window runs back from ``clock()`` (default ``now``), read first; the slack runs from
    ``clock()`` read after the pick. Executions beyond the
    ``at_once`` that can start at once (free workers) are only taken while the window has
    room to spare after them, with the larger slack. A full batch from a window with room
    to spare counts more starts ahead (``credit``), but for a task with a ``max_concurrency``
    (``concurrent``), whose picks count under the lock."""
    at = now if clock is None else clock()
    free = room(conn, stmts, name, rate, at)
    ahead = free.available > allowed
    taking = allowed if ahead else min(free.available, at_once)
    if taking <= 0:
        if free.available == 0:
            return Rated([], reopen=reopens_at(conn, stmts, name, rate, at))
        waiting = due(conn, stmts, name, now)  # for a free worker
        return Rated([], drained=not waiting, held_back=waiting)
    found = take(limit=taking)
    if not found:
        return Rated(found)
    full = len(found) == taking
    more = credit(free.available, len(found)) if ahead and full and not concurrent else 0
    # the slack runs from after the pick: the closer to the starts, the less of it is spent
    # before them (a later time leaves only more room before it)
    after = at if clock is None else max(at, clock())
    by = after + slack(rate, ahead=ahead)
    entry = count(conn, stmts, name, rate, free, len(found) + more, by)
    counted = Rated(
        found, start_by=by, credit=(more, entry, credit_until(after, by)) if more else None
    )
    if not full:
        return counted  # all that was due
    if len(found) == free.available:  # the window is full: what is due waits for it
        return replace(counted, reopen=reopens_at(conn, stmts, name, rate, at))
    return replace(counted, drained=False, held_back=taking < allowed)


def due(conn: Connection, stmts: Rates, name: str, now: datetime) -> bool:
    """Whether the task ``name`` has an execution due by ``now`` that a pick would take."""
    return bool(conn.execute(stmts.due, {"name": name, "now": now}).scalar())
