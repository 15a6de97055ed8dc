"""The benchmark's settings and results: how much work each scenario does, the figures and
table statistics a run records, and the error a scenario raises when it cannot produce its
figure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Counts:
    """How much work each scenario does."""

    drain_rows: int = 20_000
    drain_pick: int = 50
    single_txns: int = 2_000
    batch_txns: int = 20
    batch_size: int = 1_000
    latency_runs: int = 200
    latency_gap: float = 0.020
    #: Commit-to-start latency where the due-time read finds the work (no NOTIFY): rounds,
    #: and about how far apart.
    probe_latency_runs: int = 100
    probe_gap: float = 0.200
    #: Members of the one big group ``big_group`` drains.
    big_group: int = 100_000
    #: The soak: executions one worker runs in all, scheduled ``soak_batch`` at a time.
    soak_executions: int = 1_000_000
    soak_batch: int = 10_000
    #: Executions held running at once by one worker, async and sync.
    memory_async: int = 1_000
    memory_sync: int = 100
    #: Executions of a 20 ms handler drained with and without progress reports.
    progress_rows: int = 2_000
    #: Running executions stopped one at a time by ``cancel``.
    stop_runs: int = 50

    @classmethod
    def quick(cls) -> Counts:
        return cls(
            drain_rows=2_000,
            single_txns=200,
            batch_txns=4,
            latency_runs=30,
            probe_latency_runs=15,
            big_group=10_000,
            soak_executions=20_000,
            soak_batch=2_000,
            progress_rows=400,
            stop_runs=20,
        )


@dataclass
class Figure:
    """One line of the results table."""

    key: str
    label: str
    value: float | None
    unit: str
    floor: float | None = None
    floor_key: str | None = None
    target: str = ""
    target_ratio: float | None = None
    met: bool | None = None
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.value is None or not self.floor:
            return None
        return self.value / self.floor


@dataclass
class TableStats:
    """``pg_stat_user_tables`` of ``scheduled_tasks`` after a drain."""

    run: str
    n_dead_tup: int | None
    n_live_tup: int | None
    n_tup_ins: int | None
    n_tup_upd: int | None
    n_tup_hot_upd: int | None
    n_tup_del: int | None
    autovacuum_count: int | None
    settled: bool


class ScenarioError(RuntimeError):
    """A scenario could not produce its figure."""


def better(kept: Figure | None, figure: Figure) -> Figure:
    """The better of a round's ``figure`` and the one ``kept`` so far (a higher rate)."""
    if kept is None or (figure.value or 0) > (kept.value or 0):
        return figure
    return kept
