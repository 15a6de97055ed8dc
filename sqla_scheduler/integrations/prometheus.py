"""Prometheus metrics (``pip install sqla-scheduler[prometheus]``).

::

    from prometheus_client import start_http_server
    from sqla_scheduler.integrations.prometheus import SchedulerMetrics

    metrics = SchedulerMetrics()                      # registers on the default registry
    scheduler = Scheduler(engine, tasks, interceptors=[metrics])
    start_http_server(9464)
    async with anyio.create_task_group() as tg:
        tg.start_soon(metrics.run_collector, scheduler)  # refreshes the gauges
        tg.start_soon(scheduler.run)

What the interceptor measures (per execution of this process):

- ``sqla_scheduler_executions_total{task, outcome}``: handlers finished, ``outcome`` being
  ``success`` or ``failure``;
- ``sqla_scheduler_execution_duration_seconds{task}``: how long handlers ran (histogram);
- ``sqla_scheduler_pick_latency_seconds{task}``: from when an execution was due to when its
  handler started (histogram).

What ``SchedulerMetrics.collect_once`` counts in the table (the whole cluster's), as
gauges: ``sqla_scheduler_due_executions`` (the backlog, orphans that are due included),
``..._running_executions``, ``..._failing_executions``, ``..._orphaned_executions`` and
``..._scheduled_executions`` (every execution not running).
"""

from __future__ import annotations

import logging
import time
from functools import partial
from typing import Any, NoReturn

from sqla_scheduler._extras import missing_extra

try:
    from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra(__name__, "prometheus-client", "prometheus") from exc

import anyio

from sqla_scheduler import _store
from sqla_scheduler._bridge import Database
from sqla_scheduler._statements import statements_for
from sqla_scheduler.clock import Clock, SystemClock
from sqla_scheduler.context import ExecutionContext
from sqla_scheduler.interceptors import CallNext, ExecutionInterceptor
from sqla_scheduler.scheduler import Scheduler

__all__ = ["GAUGED_STATES", "SchedulerMetrics"]

log = logging.getLogger("sqla_scheduler.prometheus")

#: The execution states ``SchedulerMetrics.collect_once`` keeps a gauge of.
GAUGED_STATES = ("due", "running", "failing", "orphaned", "scheduled")

_LATENCY_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600)


class SchedulerMetrics(ExecutionInterceptor):
    """Execution metrics (as an interceptor) and table gauges (``run_collector``).

    ``registry`` defaults to prometheus_client's global ``REGISTRY``; pass a
    ``CollectorRegistry()`` of your own to keep them apart (tests do). ``namespace``
    prefixes every metric name. ``clock`` measures pick latency and decides what is due:
    give it the scheduler's clock when that is not the system clock.
    """

    def __init__(
        self,
        registry: CollectorRegistry | None = REGISTRY,
        *,
        namespace: str = "sqla_scheduler",
        clock: Clock | None = None,
        duration_buckets: tuple[float, ...] = Histogram.DEFAULT_BUCKETS,
        latency_buckets: tuple[float, ...] = _LATENCY_BUCKETS,
    ) -> None:
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.executions = Counter(
            "executions",
            "Executions whose handler finished, by task and outcome (success or failure).",
            ["task", "outcome"],
            namespace=namespace,
            registry=registry,
        )
        self.duration = Histogram(
            "execution_duration_seconds",
            "How long handlers ran, by task.",
            ["task"],
            namespace=namespace,
            registry=registry,
            buckets=duration_buckets,
        )
        self.pick_latency = Histogram(
            "pick_latency_seconds",
            "From when an execution was due to when its handler started, by task.",
            ["task"],
            namespace=namespace,
            registry=registry,
            buckets=latency_buckets,
        )
        self.gauges: dict[str, Gauge] = {
            state: Gauge(
                f"{state}_executions",
                f"Executions in the table that are {state} (refreshed by the collector).",
                namespace=namespace,
                registry=registry,
            )
            for state in GAUGED_STATES
        }

    async def intercept(self, context: ExecutionContext[Any], call_next: CallNext) -> Any:
        """Count and time the handler; record how late it started."""
        task = context.task_name
        late = (self.clock.now() - context.execution_time).total_seconds()
        self.pick_latency.labels(task).observe(max(0.0, late))
        started = time.monotonic()
        try:
            result = await call_next()
        except Exception:
            self._finished(task, "failure", started)
            raise
        self._finished(task, "success", started)
        return result

    def _finished(self, task: str, outcome: str, started: float) -> None:
        self.duration.labels(task).observe(time.monotonic() - started)
        self.executions.labels(task, outcome).inc()

    async def collect_once(self, scheduler: Scheduler) -> dict[str, int]:
        """Count the executions in each state in one query; set the gauges; return counts."""
        db = Database(scheduler.engine)
        counts = await db.run(
            partial(
                _store.state_counts,
                statements=statements_for(scheduler.table, db.backend),
                known_tasks=frozenset(scheduler.tasks),
                now=self.clock.now(),
            ),
            autocommit=True,
            read_only=True,
        )
        for state, gauge in self.gauges.items():
            gauge.set(counts[state])
        return counts

    async def run_collector(self, scheduler: Scheduler, interval: float = 15.0) -> NoReturn:
        """Refresh the gauges every ``interval`` seconds, forever (cancel it to stop)."""
        while True:
            try:
                await self.collect_once(scheduler)
            except Exception:
                log.warning("counting executions for the gauges failed; retrying", exc_info=True)
            await anyio.sleep(interval)
