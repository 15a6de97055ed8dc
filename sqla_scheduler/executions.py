"""Read-only views of scheduled executions, as listed by ``Scheduler.executions``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy.engine import RowMapping

__all__ = ["Execution", "ExecutionState"]

#: Which executions to list: ``scheduled`` (every unpicked row), ``due`` (unpicked and due
#: now), ``running`` (picked), ``failing`` (one or more consecutive failures),
#: ``orphaned`` (task names this scheduler does not know), or ``all``.
ExecutionState = Literal["all", "scheduled", "due", "running", "failing", "orphaned"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Execution:
    """A snapshot of one row of the scheduler's table."""

    task_name: str
    instance_id: str
    #: The stored payload in its JSON form (not decoded).
    data: Any
    execution_time: datetime
    picked: bool
    picked_by: str | None
    last_heartbeat: datetime | None
    last_success: datetime | None
    last_failure: datetime | None
    consecutive_failures: int
    version: int
    priority: int
    schedule: str | None

    @classmethod
    def from_row(cls, row: RowMapping) -> Execution:
        """Build from a result row of the scheduler's table."""
        return cls(
            task_name=row["task_name"],
            instance_id=row["task_instance"],
            data=row["task_data"],
            execution_time=row["execution_time"],
            picked=row["picked"],
            picked_by=row["picked_by"],
            last_heartbeat=row["last_heartbeat"],
            last_success=row["last_success"],
            last_failure=row["last_failure"],
            consecutive_failures=row["consecutive_failures"],
            version=row["version"],
            priority=row["priority"],
            schedule=row["schedule"],
        )
