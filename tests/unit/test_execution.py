"""``Execution``: the word for its state, and its JSON form."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta, timezone

from sqla_scheduler import Execution
from tests.support.builders import execution_at

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=timezone.utc)
BASE = execution_at(
    NOW + timedelta(minutes=5),
    task_name="send-email",
    instance_id="welcome-1",
    data={"to": "ada@example.com"},
)


def test_status_names_what_the_execution_is_doing() -> None:
    assert BASE.status(NOW) == "scheduled"
    assert replace(BASE, execution_time=NOW).status(NOW) == "due"
    assert replace(BASE, consecutive_failures=1).status(NOW) == "failing"
    assert replace(BASE, picked=True, consecutive_failures=1).status(NOW) == "running"
    assert BASE.status(NOW, known_tasks={"charge"}) == "orphaned"
    assert BASE.status(NOW, known_tasks={"send-email"}) == "scheduled"
    # Running wins over orphaned: whoever picked it knows the task.
    assert replace(BASE, picked=True).status(NOW, known_tasks=()) == "running"


def test_to_json_has_every_field_in_json_types() -> None:
    paris = timezone(timedelta(hours=1))
    execution = replace(BASE, picked=True, last_heartbeat=datetime(2030, 1, 1, 13, tzinfo=paris))
    as_json = execution.to_json()
    assert json.loads(json.dumps(as_json)) == as_json
    assert as_json["last_heartbeat"] == "2030-01-01T12:00:00+00:00"  # always UTC
    assert as_json["execution_time"] == "2030-01-01T12:05:00+00:00"
    assert as_json["data"] == {"to": "ada@example.com"}
    assert as_json["last_success"] is None
    assert set(as_json) == set(Execution.__dataclass_fields__)
