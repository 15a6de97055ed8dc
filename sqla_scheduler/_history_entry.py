"""The values of the history table, with no upward imports: re-exported by the public
``sqla_scheduler.history``, used by the store and the runner."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, get_args

from sqlalchemy import RowMapping

from sqla_scheduler._types import load_json
from sqla_scheduler.models import DEAD_LETTER_OUTCOMES

__all__ = [
    "HISTORY_SORTS",
    "OUTCOMES",
    "REQUEUEABLE",
    "HistoryEntry",
    "HistorySetting",
    "Outcome",
    "keeps",
]

Outcome = Literal["succeeded", "failed", "abandoned", "dead", "undecodable", "snoozed", "cancelled"]
"""How a finished attempt ended: its handler returned (``succeeded``) or raised
(``failed``, to be retried); it failed for the last time (``abandoned``: the execution left
the table); its scheduler died while it ran (``dead``: revived elsewhere); its payload
could not be decoded (``undecodable``: the execution left the table); its handler
raised ``Snooze`` (``snoozed``: it runs again later, no failure counted); or ``cancel``
stopped it while it ran (``cancelled``: the execution left the table)."""

OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)

#: The outcomes whose entries hold the payload of an execution that left the table.
REQUEUEABLE = DEAD_LETTER_OUTCOMES

#: The sort keys of a history listing: the columns each orders by (then by id).
HISTORY_SORTS: dict[str, tuple[str, ...]] = {
    "finished": ("finished_at",),
    "task": ("task_name",),
    "instance": ("task_instance",),
    "outcome": ("outcome",),
    "attempt": ("attempt",),
}

HistorySetting = Literal["failures", "all", "none"]

#: The outcomes only ``history="all"`` records: neither is a failure.
_ALL_ONLY: tuple[Outcome, ...] = ("succeeded", "snoozed")


def keeps(setting: HistorySetting, outcome: Outcome) -> bool:
    """Whether the ``history`` setting ``setting`` records an entry for ``outcome``:
    ``failures`` keeps every outcome but ``succeeded`` and ``snoozed``."""
    if setting == "none":
        return False
    return setting == "all" or outcome not in _ALL_ONLY


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryEntry:
    """One finished attempt, as the history table keeps it."""

    id: int
    """The entry's number; later entries have larger ones. ``requeue`` takes it."""
    task_name: str
    instance_id: str
    outcome: Outcome
    execution_time: datetime | None
    """When the execution was due."""
    started_at: datetime | None
    """When its handler started; ``None`` for an execution that never ran (undecodable,
    or abandoned before it ran again)."""
    finished_at: datetime
    """When the outcome was recorded (for ``dead``: when the death was noticed)."""
    picked_by: str | None
    """The scheduler that ran it."""
    attempt: int
    """Which attempt in a row this was: 1, then one more for each failure before it."""
    error: str | None
    """The error's type and message, then its traceback (cut to a few KB), or what was
    wrong; ``None`` for a success."""
    data: Any
    """The payload as stored (its JSON form, not decoded) where the execution left the
    table (``abandoned``, ``undecodable``); ``None`` otherwise."""
    priority: int = 0
    payload_version: int = 1
    """The version ``data`` was written with (see the task's ``payload_version``);
    ``requeue`` schedules it again as that version."""

    @property
    def duration(self) -> timedelta | None:
        """How long the attempt ran, from its start to its outcome; ``None`` without a start."""
        if self.started_at is None:
            return None
        return self.finished_at - self.started_at

    @classmethod
    def from_row(cls, row: RowMapping) -> HistoryEntry:
        """Build from a row of the history table."""
        return cls(
            id=row["id"],
            task_name=row["task_name"],
            instance_id=row["task_instance"],
            outcome=row["outcome"],
            execution_time=row["execution_time"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            picked_by=row["picked_by"],
            attempt=row["attempt"],
            error=row["error"],
            data=load_json(row["task_data"]),
            priority=row["priority"],
            payload_version=row.get("payload_version", 1),
        )
