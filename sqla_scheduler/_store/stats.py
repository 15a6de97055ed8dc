"""Per-minute counts of finished executions (``<table>_stats``), for the admin's charts.

A running scheduler counts what its completer committed in a ``Tally`` in memory (by
minute of finish, task and outcome: a count, the sums of start lag and duration, and a
histogram of each, ``models.STATS_BOUNDS_MS``) and adds it to its own rows every few
seconds (``add``, one upsert statement); a process killed loses the counts since its last
flush. ``activity`` reads them back summed over processes, by time bucket and outcome,
with percentiles from the summed histograms; ``prune`` deletes old minutes.

These are counts, not history: they exist whatever the ``history`` setting keeps.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Connection

from sqla_scheduler._statements import Statements
from sqla_scheduler.models import STATS_BOUNDS_MS, STATS_BUCKETS, STATS_COLUMNS

__all__ = [
    "PERCENTILES",
    "Activity",
    "Percentiles",
    "Point",
    "Tally",
    "activity",
    "add",
    "minute_of",
    "percentile",
    "prune",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
#: Where each part of a row's counts sits in its list of ``STATS_COLUMNS`` values.
_EXECUTIONS, _LAG_MS, _DURATION_MS, _LAG_0 = 0, 1, 2, 3
_DURATION_0 = _LAG_0 + STATS_BUCKETS
#: The percentiles read for each time bucket and for the whole period.
PERCENTILES = (50, 95, 99)

Key = tuple[int, str, str]
"""What a tally counts by: minute (since the epoch), task name, outcome."""


def minute_of(at: datetime) -> int:
    """``at`` as whole minutes since 1970-01-01 UTC, the stats table's ``minute``."""
    return int((at - _EPOCH).total_seconds() // 60)


def _ms(later: datetime, earlier: datetime) -> int:
    # a start before its due time (clocks of two machines) counts as no lag
    return max(int((later - earlier).total_seconds() * 1000), 0)


class Tally:
    """The counts of one process not yet added to the table: its completer counts each
    committed outcome, its stats service takes them (``take``) and adds them, or puts them
    back when that fails."""

    def __init__(self) -> None:
        self._rows: dict[Key, list[int]] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def count(
        self,
        *,
        task_name: str,
        outcome: str,
        finished_at: datetime,
        due: datetime,
        started_at: datetime | None,
    ) -> None:
        """Count one execution of ``task_name`` due at ``due`` that finished at
        ``finished_at`` as ``outcome``; its start lag and duration too if it started."""
        key = (minute_of(finished_at), task_name, outcome)
        row = self._rows.get(key)
        if row is None:
            row = self._rows[key] = [0] * len(STATS_COLUMNS)
        row[_EXECUTIONS] += 1
        if started_at is None:
            return
        lag, duration = _ms(started_at, due), _ms(finished_at, started_at)
        row[_LAG_MS] += lag
        row[_DURATION_MS] += duration
        row[_LAG_0 + bisect_right(STATS_BOUNDS_MS, lag)] += 1
        row[_DURATION_0 + bisect_right(STATS_BOUNDS_MS, duration)] += 1

    def take(self) -> dict[Key, list[int]]:
        """Every count so far, which the tally forgets."""
        rows, self._rows = self._rows, {}
        return rows

    def put_back(self, rows: Mapping[Key, Sequence[int]]) -> None:
        """Count again what ``take`` gave and could not be added."""
        for key, values in rows.items():
            row = self._rows.get(key)
            if row is None:
                self._rows[key] = list(values)
            else:
                for i, value in enumerate(values):
                    row[i] += value


def add(
    conn: Connection, statements: Statements, *, node: str, rows: Mapping[Key, Sequence[int]]
) -> None:
    """Add ``rows`` (a ``Tally``'s) to the rows of ``node`` (this process's name), in one
    statement; the caller commits."""
    if not rows:
        return
    values = [
        {
            "minute": minute,
            "task_name": task_name,
            "node": node,
            "outcome": outcome,
            **dict(zip(STATS_COLUMNS, counts, strict=True)),
        }
        for (minute, task_name, outcome), counts in rows.items()
    ]
    conn.execute(statements.stats.add, values)


def prune(conn: Connection, statements: Statements, *, threshold: datetime, limit: int) -> int:
    """Delete the rows of about ``limit`` of the oldest minutes' rows before
    ``threshold`` (whole minutes); return how many."""
    found = conn.execute(
        statements.stats.prune, {"threshold": minute_of(threshold), "limit": limit}
    )
    return int(found.rowcount)


def percentile(buckets: Sequence[int], q: float) -> float | None:
    """The ``q``-th percentile (0 to 100), in milliseconds, of the values counted in
    ``buckets`` (a histogram over ``STATS_BOUNDS_MS``); ``None`` when it counts none.

    Interpolated linearly within the bucket it falls in, as if its values were spread
    evenly between the bucket's bounds; in the last bucket (over 10 minutes) it is that
    bucket's lower bound."""
    total = sum(buckets)
    if total == 0:
        return None
    rank = q / 100 * total
    below = 0
    for i, counted in enumerate(buckets):
        if counted and below + counted >= rank:
            low = 0 if i == 0 else STATS_BOUNDS_MS[i - 1]
            if i == len(STATS_BOUNDS_MS):
                return float(low)
            high = STATS_BOUNDS_MS[i]
            return low + (high - low) * max(rank - below, 0) / counted
        below += counted
    return float(STATS_BOUNDS_MS[-1])  # not reached: the last bucket holds the rank


@dataclass(frozen=True, slots=True, kw_only=True)
class Percentiles:
    """Percentiles of start lag or duration, in milliseconds (see ``percentile``), and the
    mean; ``None`` each where nothing was measured."""

    p50: float | None = None
    p95: float | None = None
    p99: float | None = None
    mean: float | None = None

    @classmethod
    def of(cls, buckets: Sequence[int], total_ms: int) -> Percentiles:
        """Those of a histogram and the sum of its values."""
        measured = sum(buckets)
        p50, p95, p99 = (percentile(buckets, q) for q in PERCENTILES)
        return cls(p50=p50, p95=p95, p99=p99, mean=total_ms / measured if measured else None)

    def to_json(self) -> dict[str, float | None]:
        """As a JSON object, milliseconds rounded to the microsecond."""
        return {
            name: None if value is None else round(value, 3)
            for name, value in (
                ("p50", self.p50),
                ("p95", self.p95),
                ("p99", self.p99),
                ("mean", self.mean),
            )
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """The executions finished from ``start`` for one step: how many by outcome, and the
    percentiles of their start lags and durations."""

    start: datetime
    counts: dict[str, int]
    lag: Percentiles
    duration: Percentiles

    @property
    def total(self) -> int:
        """How many finished, whatever their outcome."""
        return sum(self.counts.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class Activity:
    """What the executions finished from ``since`` to before ``until`` came to, in
    ``points`` of ``step`` each (every step, those with none too), and in all."""

    since: datetime
    until: datetime
    step: timedelta
    task: str | None
    points: list[Point]
    counts: dict[str, int] = field(default_factory=dict)
    lag: Percentiles = field(default_factory=Percentiles)
    duration: Percentiles = field(default_factory=Percentiles)

    @property
    def total(self) -> int:
        """How many finished in the period, whatever their outcome."""
        return sum(self.counts.values())


def _summed(rows: Sequence[Sequence[int]]) -> list[int]:
    return [sum(column) for column in zip(*rows, strict=True)] or [0] * len(STATS_COLUMNS)


def _percentiles(values: Sequence[int]) -> tuple[Percentiles, Percentiles]:
    lag = Percentiles.of(values[_LAG_0:_DURATION_0], values[_LAG_MS])
    duration = Percentiles.of(values[_DURATION_0:], values[_DURATION_MS])
    return lag, duration


def activity(
    conn: Connection,
    statements: Statements,
    *,
    now: datetime,
    step_minutes: int,
    points: int,
    task: str | None = None,
) -> Activity:
    """The last ``points`` steps of ``step_minutes`` up to ``now`` (the last one holding
    ``now``; steps start at whole multiples of ``step_minutes`` since the epoch), for the
    task ``task`` or all of them."""
    until = (minute_of(now) // step_minutes + 1) * step_minutes
    since = until - points * step_minutes
    query = statements.stats.activity(step_minutes, one_task=task is not None)
    params: dict[str, Any] = {"since": since, "until": until}
    if task is not None:
        params["task"] = task
    by_bucket: dict[int, dict[str, list[int]]] = {}
    for row in conn.execute(query, params):
        values = [int(row._mapping[name] or 0) for name in STATS_COLUMNS]
        by_bucket.setdefault(int(row.bucket), {})[row.outcome] = values
    series: list[Point] = []
    counts: dict[str, int] = {}
    every: list[list[int]] = []
    for minute in range(since, until, step_minutes):
        outcomes = by_bucket.get(minute, {})
        summed = _summed(list(outcomes.values()))
        every.append(summed)
        lag, duration = _percentiles(summed)
        point_counts = {name: values[_EXECUTIONS] for name, values in outcomes.items()}
        for name, n in point_counts.items():
            counts[name] = counts.get(name, 0) + n
        series.append(
            Point(
                start=_EPOCH + timedelta(minutes=minute),
                counts=point_counts,
                lag=lag,
                duration=duration,
            )
        )
    lag, duration = _percentiles(_summed(every))
    return Activity(
        since=_EPOCH + timedelta(minutes=since),
        until=_EPOCH + timedelta(minutes=until),
        step=timedelta(minutes=step_minutes),
        task=task,
        points=series,
        counts=counts,
        lag=lag,
        duration=duration,
    )
