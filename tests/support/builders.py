"""Values more than one unit test module builds."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from typing import Any

from sqla_scheduler import Execution

_PLAIN = Execution(
    task_name="job",
    instance_id="i",
    data=None,
    execution_time=datetime(2030, 1, 1, tzinfo=timezone.utc),
    picked=False,
    picked_by=None,
    last_heartbeat=None,
    last_success=None,
    last_failure=None,
    consecutive_failures=0,
    version=1,
    priority=0,
    schedule=None,
)


def execution_at(when: datetime, **fields: Any) -> Execution:
    """An execution of ``job``/``i`` at ``when``, never picked nor run; ``fields`` replace
    any other of its fields."""
    return replace(_PLAIN, execution_time=when, **fields)
