"""The OpenTelemetry interceptor: a span per execution, continuing the scheduling trace."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from sqla_scheduler import ManualClock, Scheduler, one_time
from sqla_scheduler.integrations.opentelemetry import OpenTelemetryInterceptor
from tests.support import NOW, Harness

pytestmark = pytest.mark.anyio

#: A task that does nothing, for the tests of what its spans carry.
EMAIL = one_time("email")(lambda ctx: None)


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def executions(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("sqla_scheduler.")]


@pytest.mark.parametrize("handler_kind", ["sync", "async"])
async def test_a_span_per_execution_with_its_attributes(
    db: Harness, provider: TracerProvider, exporter: InMemorySpanExporter, handler_kind: str
):
    tracer = provider.get_tracer("handler")
    if handler_kind == "sync":

        def handler(ctx: Any) -> None:
            with tracer.start_as_current_span("inside"):
                pass
    else:

        async def handler(ctx: Any) -> None:
            with tracer.start_as_current_span("inside"):
                pass

    task = one_time("email")(handler)
    scheduler = Scheduler(
        db.engine,
        [task],
        clock=ManualClock(NOW),
        interceptors=[OpenTelemetryInterceptor(tracer_provider=provider)],
    )
    await db.resolve(scheduler.schedule(db.engine, task.instance("e-1", {"to": "secret"})))
    assert db.count("trace_context is null") == 1  # no span was current
    assert await scheduler.run_due() == 1
    [span] = executions(exporter)
    assert span.name == "sqla_scheduler.execute email"
    assert span.kind is SpanKind.CONSUMER
    assert dict(span.attributes or {}) == {
        "task.name": "email",
        "task.instance": "e-1",
        "task.consecutive_failures": 0,
        "task.priority": 0,
        "task.outcome": "success",
    }
    assert span.parent is None
    assert span.status.status_code is StatusCode.UNSET
    # The handler's own spans are children of the execution's, sync handlers' too.
    [inside] = [s for s in exporter.get_finished_spans() if s.name == "inside"]
    assert inside.parent is not None
    assert span.context is not None
    assert inside.parent.span_id == span.context.span_id


async def test_a_failure_is_recorded_on_the_span(
    db: Harness, provider: TracerProvider, exporter: InMemorySpanExporter
):
    @one_time("email")
    def task(ctx: Any) -> None:
        raise ConnectionError("smtp down")

    scheduler = Scheduler(
        db.engine,
        [task],
        clock=ManualClock(NOW),
        interceptors=[OpenTelemetryInterceptor(tracer_provider=provider)],
    )
    await db.resolve(scheduler.schedule(db.engine, task.instance("e-1")))
    assert await scheduler.run_due() == 1
    [span] = executions(exporter)
    assert (span.attributes or {})["task.outcome"] == "failure"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "ConnectionError: smtp down"
    [event] = span.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.type"] == "ConnectionError"
    # the failure is still the scheduler's: it retries
    execution = await db.resolve(scheduler.get_execution(db.engine, "email", "e-1"))
    assert execution.consecutive_failures == 1


@pytest.mark.parametrize("batch", [False, True])
async def test_the_execution_continues_the_trace_it_was_scheduled_in(
    db: Harness, provider: TracerProvider, exporter: InMemorySpanExporter, batch: bool
):
    interceptor = OpenTelemetryInterceptor(tracer_provider=provider)
    web = Scheduler(db.engine, [EMAIL], clock=ManualClock(NOW), interceptors=[interceptor])
    with provider.get_tracer("web").start_as_current_span("POST /signup") as request:
        if batch:
            instances = [EMAIL.instance("e-1"), EMAIL.instance("e-2")]
            await db.resolve(web.schedule_batch(db.engine, instances))
        else:
            await db.resolve(web.schedule(db.engine, EMAIL.instance("e-1")))
    assert db.count("trace_context is null") == 0

    worker = Scheduler(db.engine, [EMAIL], clock=ManualClock(NOW), interceptors=[interceptor])
    assert await worker.run_due() == (2 if batch else 1)
    spans = executions(exporter)
    assert len(spans) == (2 if batch else 1)
    for span in spans:
        assert span.parent is not None
        assert span.context is not None
        assert span.parent.span_id == request.get_span_context().span_id
        assert span.context.trace_id == request.get_span_context().trace_id


async def test_link_instead_of_parent(
    db: Harness, provider: TracerProvider, exporter: InMemorySpanExporter
):
    interceptor = OpenTelemetryInterceptor(tracer_provider=provider, link=True)
    scheduler = Scheduler(db.engine, [EMAIL], clock=ManualClock(NOW), interceptors=[interceptor])
    with provider.get_tracer("web").start_as_current_span("POST /signup") as request:
        await db.resolve(scheduler.schedule(db.engine, EMAIL.instance("e-1")))
    assert await scheduler.run_due() == 1
    [span] = executions(exporter)
    assert span.parent is None
    assert span.context is not None
    assert span.context.trace_id != request.get_span_context().trace_id
    [link] = span.links
    assert link.context.span_id == request.get_span_context().span_id


@pytest.mark.parametrize("include_payload", [False, True])
async def test_the_payload_only_when_enabled(
    db: Harness, provider: TracerProvider, exporter: InMemorySpanExporter, include_payload: bool
):
    interceptor = OpenTelemetryInterceptor(
        tracer_provider=provider, include_payload=include_payload
    )
    scheduler = Scheduler(db.engine, [EMAIL], clock=ManualClock(NOW), interceptors=[interceptor])
    await db.resolve(scheduler.schedule(db.engine, EMAIL.instance("e-1", {"to": "a@b.c"})))
    assert await scheduler.run_due() == 1
    [span] = executions(exporter)
    attributes = dict(span.attributes or {})
    if include_payload:
        assert attributes["task.payload"] == '{"to": "a@b.c"}'
    else:
        assert "task.payload" not in attributes


def test_without_the_extra_the_import_says_what_to_install(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.delitem(sys.modules, "sqla_scheduler.integrations.opentelemetry")
    with pytest.raises(ImportError, match=r"pip install sqla-scheduler\[otel\]"):
        importlib.import_module("sqla_scheduler.integrations.opentelemetry")
