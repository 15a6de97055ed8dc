"""Values more than one unit test module builds."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from sqla_scheduler import Execution, SchedulerConfig
from tests.support.clocks import NOW

#: The config the outcome policy's tests decide with: a backoff from 30 seconds, doubling,
#: capped at an hour.
RETRY_CONFIG = SchedulerConfig(
    retry_base_delay=timedelta(seconds=30),
    retry_backoff_rate=2.0,
    retry_max_delay=timedelta(hours=1),
)

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


def picked(*, failures: int = 0, **fields: Any) -> Execution:
    """An execution of ``job``/``i`` as the outcome policy gets it: picked by ``me``, due
    five seconds before ``NOW``, its heartbeat at ``NOW``, at version 2, with ``failures``
    failures in a row; ``fields`` replace any other of its fields."""
    return execution_at(
        NOW - timedelta(seconds=5),
        picked=True,
        picked_by="me",
        last_heartbeat=NOW,
        consecutive_failures=failures,
        version=2,
        **fields,
    )
