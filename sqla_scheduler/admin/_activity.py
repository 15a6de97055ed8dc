"""The overview's activity charts and ``/api/activity``: what the executions finished in
the last hour (a point a minute) or day (a point per 15 minutes) came to, for one task or
all, read from the per-minute counts (``_store.stats``) that every scheduler adds
whatever ``history`` keeps.

Query parameters: ``span`` (``hour``, the default, or ``day``) and ``task`` (a task name;
empty or ``all`` for every task); a wrong one is a 400 naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sqla_scheduler._console import Activity
from sqla_scheduler.admin._charts import charts
from sqla_scheduler.admin._pages import Handlers, text_param
from sqla_scheduler.models import MAX_TASK_NAME_LENGTH

__all__ = ["SPANS", "ActivityPages", "ActivityRequest"]

#: Each span the charts show: its steps' length in minutes, and how many steps.
SPANS = {"hour": (1, 60), "day": (15, 96)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ActivityRequest:
    """Which period (``span``) and which task (``None``: all) the charts show."""

    span: str
    task: str | None

    @classmethod
    def of(cls, request: Request) -> ActivityRequest:
        """The request's ``span`` and ``task``; a 400 naming a wrong one."""
        q = request.query_params
        span = q.get("span") or "hour"
        if span not in SPANS:
            shown = span if len(span) <= 40 else span[:40] + "..."
            raise HTTPException(400, f"span must be one of {', '.join(SPANS)}, got {shown!r}")
        task = text_param(q, "task", MAX_TASK_NAME_LENGTH)
        return cls(span=span, task=None if task in (None, "all") else task)


class ActivityPages(Handlers):
    """The activity section of the overview, and its JSON."""

    async def read(self, asked: ActivityRequest) -> Activity:
        """The activity ``asked`` for, read where the pages read (a replica's, if any)."""
        step, points = SPANS[asked.span]
        return await self.pages.console.reads.activity(
            step_minutes=step, points=points, task=asked.task
        )

    async def section(self, request: Request) -> dict[str, Any]:
        """What ``templates/_charts.html`` shows, under ``activity`` in the context."""
        asked = ActivityRequest.of(request)
        found = await self.read(asked)
        names = sorted(self.scheduler.tasks)
        if asked.task is not None and asked.task not in names:
            names.append(asked.task)  # counted by another process: still choosable here
        return {
            "activity": charts(found, asked.span),
            "activity_task": asked.task,
            "activity_tasks": names,
            "activity_spans": list(SPANS),
            "stats_on": self.scheduler.config.stats,
        }

    async def api(self, request: Request) -> Response:
        """``/api/activity``: the points and totals as JSON."""
        asked = ActivityRequest.of(request)
        found = await self.read(asked)
        return JSONResponse(
            {
                "span": asked.span,
                "task": asked.task,
                "since": found.since.isoformat(),
                "until": found.until.isoformat(),
                "step_seconds": found.step.total_seconds(),
                "counts": found.counts,
                "lag_ms": found.lag.to_json(),
                "duration_ms": found.duration.to_json(),
                "points": [
                    {
                        "start": p.start.isoformat(),
                        "counts": p.counts,
                        "lag_ms": p.lag.to_json(),
                        "duration_ms": p.duration.to_json(),
                    }
                    for p in found.points
                ],
            }
        )
