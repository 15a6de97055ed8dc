"""The Prometheus metrics: counters and histograms per execution, gauges of the table."""

from __future__ import annotations

import importlib
import sys
from datetime import timedelta
from typing import Any

import anyio
import pytest
from prometheus_client import CollectorRegistry

from sqla_scheduler import ManualClock, Scheduler, SchedulerConfig, one_time
from sqla_scheduler.integrations.prometheus import SchedulerMetrics
from sqla_scheduler.listeners import SchedulerListener
from tests.support import NOW, Harness, wait_for

pytestmark = pytest.mark.anyio


@pytest.fixture
def registry() -> CollectorRegistry:
    """A registry of the test's own."""
    return CollectorRegistry()


@pytest.fixture
def metrics(registry: CollectorRegistry, clock: ManualClock) -> SchedulerMetrics:
    """The metrics in ``registry``, timed by the test's clock."""
    return SchedulerMetrics(registry, clock=clock)


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_executions_are_counted_and_timed_by_task_and_outcome(
    db: Harness, registry: CollectorRegistry, clock: ManualClock, metrics: SchedulerMetrics
):

    @one_time("email")
    def email(ctx: Any) -> None:
        if ctx.payload == "bad":
            raise ValueError("bad address")

    @one_time("report")
    async def report(ctx: Any) -> None:
        pass

    started: list[str] = []

    class Listener(SchedulerListener):
        def on_start(self, context: Any) -> None:
            started.append(context.instance_id)

    scheduler = Scheduler(
        db.engine, [email, report], clock=clock, interceptors=[metrics], listeners=[Listener()]
    )
    await db.resolve(
        scheduler.schedule_batch(
            db.engine,
            [
                email.instance("a", "ok"),
                email.instance("b", "bad"),
                email.instance("c", "ok", at=NOW - timedelta(seconds=30)),
                report.instance("r"),
            ],
        )
    )
    assert await scheduler.run_due() == 4
    assert sorted(started) == ["a", "b", "c", "r"]  # listeners still hear of each, once
    total = "sqla_scheduler_executions_total"
    assert value(registry, total, task="email", outcome="success") == 2
    assert value(registry, total, task="email", outcome="failure") == 1
    assert value(registry, total, task="report", outcome="success") == 1
    assert value(registry, total, task="report", outcome="failure") is None
    duration = "sqla_scheduler_execution_duration_seconds"
    assert value(registry, f"{duration}_count", task="email") == 3
    assert value(registry, f"{duration}_count", task="report") == 1
    latency = "sqla_scheduler_pick_latency_seconds"
    assert value(registry, f"{latency}_count", task="email") == 3
    assert value(registry, f"{latency}_sum", task="email") == 30  # c was due 30s ago
    assert value(registry, f"{latency}_bucket", task="email", le="0.01") == 2


async def test_the_collector_sets_the_gauges_from_the_table(
    db: Harness, registry: CollectorRegistry, clock: ManualClock, metrics: SchedulerMetrics
):

    @one_time("email")
    def email(ctx: Any) -> None:
        raise ValueError("down")

    scheduler = Scheduler(
        db.engine,
        [email],
        SchedulerConfig(scheduler_name="w"),
        clock=clock,
        interceptors=[metrics],
    )
    stranger = Scheduler(db.engine, [one_time("gone")(lambda ctx: None)], clock=clock)
    await db.resolve(
        scheduler.schedule_batch(
            db.engine,
            [email.instance(f"due-{n}") for n in range(3)]
            + [email.instance("later", at=NOW + timedelta(hours=1))],
        )
    )
    await db.resolve(stranger.schedule(db.engine, stranger.task("gone").instance("x")))

    counts = await metrics.collect_once(scheduler)
    assert counts["due"] == 4  # the orphan is due as well
    assert value(registry, "sqla_scheduler_due_executions") == 4
    assert value(registry, "sqla_scheduler_orphaned_executions") == 1
    assert value(registry, "sqla_scheduler_running_executions") == 0
    assert value(registry, "sqla_scheduler_failing_executions") == 0
    assert value(registry, "sqla_scheduler_scheduled_executions") == 5

    assert await scheduler.run_due() == 3  # all fail, retry later
    await metrics.collect_once(scheduler)
    assert value(registry, "sqla_scheduler_due_executions") == 1  # the orphan
    assert value(registry, "sqla_scheduler_failing_executions") == 3


async def test_run_collector_refreshes_until_cancelled(
    db: Harness, registry: CollectorRegistry, metrics: SchedulerMetrics
):
    task = one_time("email")(lambda ctx: None)
    scheduler = Scheduler(db.engine, [task], clock=ManualClock(NOW))
    await db.resolve(scheduler.schedule(db.engine, task.instance("a")))
    async with anyio.create_task_group() as tg:
        tg.start_soon(metrics.run_collector, scheduler, 0.01)
        await wait_for(lambda: value(registry, "sqla_scheduler_due_executions") == 1, 10)
        tg.cancel_scope.cancel()


def test_without_the_extra_the_import_says_what_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.delitem(sys.modules, "sqla_scheduler.integrations.prometheus")
    with pytest.raises(ImportError, match=r"pip install sqla-scheduler\[prometheus\]"):
        importlib.import_module("sqla_scheduler.integrations.prometheus")
