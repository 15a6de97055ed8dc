"""The picks of the tasks with limits: ``max_concurrency`` and ``rate_limit``.

The picker (``_runner.picker``) hands them the tasks to look at; each pick takes the
tasks' executions in one transaction that counts, under each task's lock, its picked
executions or its starts in the window (``_store.pick_limited``, ``_store.rates``).

A rate-limited task whose window is full is left out of the picks until its window has
room again (``reopens``), and the waker is told of that time. In a backlog of a
rate-limited task whose window has room to spare, a pick counts more starts ahead
(``_Credit``), which the next picks take with one statement each, without the lock, as if
the task had no limit; what they do not take is given back once its time is up or the
backlog is drained.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from sqla_scheduler import _store
from sqla_scheduler._bridge import Database
from sqla_scheduler._execution import Execution
from sqla_scheduler._runner.service import Parts, Service
from sqla_scheduler._runner.waker import AHEAD, Waker
from sqla_scheduler._statements import Statements
from sqla_scheduler._store import TaskLimits
from sqla_scheduler.config import SchedulerConfig

if TYPE_CHECKING:
    from sqla_scheduler.tasks import RateLimit

__all__ = ["LimitedPicks", "pick_plain"]


async def pick_plain(
    db: Database,
    statements: Statements,
    config: SchedulerConfig,
    names: Sequence[str],
    limit: int,
    now: datetime,
) -> list[Execution]:
    """Up to ``limit`` executions of ``names`` due by ``now``, in one statement."""
    return await db.shielded(
        partial(
            _store.pick,
            statements=statements,
            names=names,
            limit=limit,
            picker=config.scheduler_name,
            now=now,
        ),
        autocommit=True,
        lane="picker",
        plan_once=True,
    )


@dataclass(slots=True)
class _Credit:
    """Starts of a rate-limited task counted ahead, in the entry ``entry``, by a pick that
    took a full batch with room to spare in its window: ``left`` of them may be picked
    without its lock until ``until``, each to start by ``start_by`` (see
    ``_store.rates.credit``); what is left then is given back."""

    left: int
    until: datetime
    start_by: datetime
    entry: int

    def usable(self, now: datetime) -> bool:
        return self.left > 0 and now < self.until


class LimitedPicks(Service):
    """The picks of the tasks with ``max_concurrency`` or ``rate_limit``, and what the
    last one learnt of them."""

    def __init__(
        self,
        parts: Parts,
        *,
        waker: Waker,
        limits: Mapping[str, int],
        rates: Mapping[str, RateLimit],
    ) -> None:
        super().__init__(parts)
        self.waker = waker
        self.rates = rates
        #: Every limited task, by name.
        self.tasks = [
            TaskLimits(name, limits.get(name), rates.get(name))
            for name in sorted({*limits, *rates})
        ]
        #: The rate-limited tasks whose window was full at their last pick, and when it has
        #: room again: they are left out of the picks until then.
        self.reopens: dict[str, datetime] = {}
        #: The last pick left due executions of a rate-limited task waiting for a free
        #: worker.
        self.held_back = False
        #: The last pick took all of a task's credit: more of it is likely due.
        self.credit_spent = False
        #: The starts counted ahead for rate-limited tasks in a backlog, by task.
        self._credits: dict[str, _Credit] = {}

    async def pick(
        self, limited: Sequence[TaskLimits], limit: int, prompt: int, now: datetime
    ) -> tuple[list[Execution], dict[str, datetime], bool]:
        """Up to ``limit`` executions of the ``limited`` tasks due by ``now`` (the first
        ``prompt`` can start at once), the time by which those of each rate-limited task
        must start, and whether it took all that was due (every task had room for more than
        it found).

        The tasks with credit (starts counted ahead, ``_Credit``) are picked with one
        statement each, as if they had no limit; the others in one transaction that counts
        under each one's lock (``_store.pick_limited``)."""
        clock = self.clock.now()
        await self._give_back(clock)
        credited = [t.name for t in limited if t.name in self._credits]
        locked = [t for t in limited if t.name not in credited]
        picked: list[Execution] = []
        start_by: dict[str, datetime] = {}
        drained, self.held_back, self.credit_spent = True, False, False
        if locked:
            picked, start_by, drained = await self._pick_locked(locked, limit, prompt, now)
        if credited:
            all_taken = await self._pick_credited(credited, limit, now, clock, picked, start_by)
            drained = drained and all_taken
        await self._give_back(clock)  # what was left of a credit whose task was drained
        return picked, start_by, drained

    async def _pick_locked(
        self, locked: Sequence[TaskLimits], limit: int, prompt: int, now: datetime
    ) -> tuple[list[Execution], dict[str, datetime], bool]:
        """``pick`` of the tasks without credit: in one transaction that counts under each
        one's lock (``_store.pick_limited``); learns which windows are full, until when,
        and the credit a pick with room to spare counted ahead."""
        result = await self.db.shielded(
            partial(
                _store.pick_limited,
                statements=self.statements,
                limits=locked,
                limit=limit,
                picker=self.config.scheduler_name,
                now=now,
                prompt=prompt,
                clock=self.clock.now,
            ),
            lane="picker-limited",
            plan_once=True,  # the pick's statement is the unlimited one's
        )
        start_by: dict[str, datetime] = {}
        for name, rated in result.rated.items():
            self.held_back = self.held_back or rated.held_back
            if rated.reopen is not None:
                self.reopens[name] = rated.reopen
            if rated.start_by is None:
                continue  # none taken
            start_by[name] = rated.start_by
            if rated.credit is not None:
                more, entry, until = rated.credit
                self._credits[name] = _Credit(more, until, rated.start_by, entry)
        self.wake_at_reopen()
        return result.executions, start_by, result.drained

    async def _pick_credited(
        self,
        credited: Sequence[str],
        limit: int,
        now: datetime,
        clock: datetime,
        picked: list[Execution],
        start_by: dict[str, datetime],
    ) -> bool:
        """``pick`` of the tasks with credit, one statement each, as if they had no limit,
        into ``picked`` (up to ``limit`` in all) and ``start_by``: whether it took all that
        was due of them."""
        drained = True
        for name in credited:
            room = limit - len(picked)
            if room <= 0:
                return False
            credit = self._credits[name]
            asked = min(room, credit.left)
            found = await pick_plain(self.db, self.statements, self.config, [name], asked, now)
            credit.left -= len(found)
            picked += found
            start_by[name] = credit.start_by
            if len(found) < asked:  # all that was due: the rest of the credit goes back
                credit.until = clock
            else:
                drained = False
                # the credit is spent, not the backlog: pick again at once, under the lock
                self.credit_spent = self.credit_spent or asked < room
        return drained

    def skip(self) -> None:
        """None was looked at: none waits for a worker now, no credit was spent."""
        self.held_back = self.credit_spent = False

    async def _give_back(self, now: datetime) -> None:
        """Give back the starts counted ahead that can no longer be picked (``_Credit``)."""
        for name, credit in list(self._credits.items()):
            if credit.usable(now):
                continue
            del self._credits[name]
            if credit.left > 0:
                await self.db.shielded(
                    partial(
                        _store.rates.give_back,
                        statements=self.statements,
                        entry=credit.entry,
                        starts=credit.left,
                    ),
                    autocommit=True,
                    lane="picker",
                )

    def now(self) -> list[TaskLimits]:
        """The limited tasks to pick now: all but the rate-limited ones whose window is
        still full."""
        if not self.reopens:
            return self.tasks
        now = self.clock.now()
        self.reopens = {name: at for name, at in self.reopens.items() if at > now}
        return [task for task in self.tasks if task.name not in self.reopens]

    def wake_at_reopen(self) -> None:
        """Have the waker wake up when the first full window has room again."""
        if self.reopens:
            # AHEAD later: the waker wakes that much before a time to pick what is due by
            # then; a slot is only free at its time
            self.waker.wake_at(min(self.reopens.values()) + AHEAD, news=False)
