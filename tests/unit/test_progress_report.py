"""``ctx.report_progress`` without a database: what it accepts, what it keeps, and the
errors naming the execution and the value of what it refuses."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from sqla_scheduler import ExecutionContext
from sqla_scheduler._progress import MAX_PROGRESS_MESSAGE
from sqla_scheduler.executions import Progress
from tests.support.builders import execution_at
from tests.support.clocks import NOW


def _context(reports: list[tuple[float | None, str | None]]) -> ExecutionContext[Any]:
    return ExecutionContext(
        payload=None,
        task_name="import",
        instance_id="file-7",
        execution_time=NOW,
        _report=lambda fraction, message: reports.append((fraction, message)),
    )


@pytest.mark.parametrize(
    ("fraction", "message", "kept"),
    [
        (0, None, (0.0, None)),
        (1, "done", (1.0, "done")),
        (Fraction(1, 4), None, (0.25, None)),
        (None, "reading", (None, "reading")),
        (None, None, (None, None)),
        (0.5, "x" * (MAX_PROGRESS_MESSAGE + 10), (0.5, "x" * MAX_PROGRESS_MESSAGE)),
    ],
)
def test_what_a_report_keeps(fraction: Any, message: Any, kept: Any) -> None:
    reports: list[tuple[float | None, str | None]] = []
    _context(reports).report_progress(fraction, message)
    assert reports == [kept]
    assert all(f is None or type(f) is float for f, _ in reports)


@pytest.mark.parametrize(
    ("fraction", "message", "error", "text"),
    [
        (-0.1, None, ValueError, "import/file-7: progress must be from 0 to 1, got -0.1"),
        (1.5, None, ValueError, "import/file-7: progress must be from 0 to 1, got 1.5"),
        (math.nan, None, ValueError, "got nan"),
        (math.inf, None, ValueError, "got inf"),
        (True, None, TypeError, "import/file-7: progress must be a number from 0 to 1, got True"),
        ("half", None, TypeError, "got 'half'"),
        (None, 3, TypeError, "import/file-7: a progress message must be a str, got 3"),
        (None, "a\x00b", ValueError, "progress message 'a\\x00b' contains a NUL character"),
        (None, "\ud800", ValueError, "contains a lone surrogate"),
    ],
)
def test_a_refused_report_names_the_execution_and_the_value(
    fraction: Any, message: Any, error: type[Exception], text: str
) -> None:
    reports: list[tuple[float | None, str | None]] = []
    with pytest.raises(error, match="import/file-7") as raised:
        _context(reports).report_progress(fraction, message)
    assert text in str(raised.value)
    assert reports == []


def test_a_context_built_by_hand_takes_reports_and_keeps_none() -> None:
    ctx = ExecutionContext(payload=None, task_name="t", instance_id="i", execution_time=NOW)
    assert ctx.report_progress(0.5, "half") is not None


@pytest.mark.anyio
async def test_an_async_handler_awaits_a_report() -> None:
    reports: list[tuple[float | None, str | None]] = []
    assert await _context(reports).report_progress(0.5) is None
    assert reports == [(0.5, None)]


def test_an_executions_progress_in_json() -> None:
    execution = execution_at(
        NOW,
        task_name="import",
        instance_id="file-7",
        picked=True,
        picked_by="worker-1",
        last_heartbeat=NOW,
        version=2,
        progress=Progress(0.5, "half", NOW),
    )
    assert json.loads(json.dumps(execution.to_json()))["progress"] == {
        "fraction": 0.5,
        "message": "half",
        "at": "2030-05-17T12:00:00+00:00",
    }
    assert replace(execution, progress=None).to_json()["progress"] is None
