"""OpenTelemetry tracing: a span per execution (``pip install sqla-scheduler[otel]``).

::

    from sqla_scheduler.integrations.opentelemetry import OpenTelemetryInterceptor

    scheduler = Scheduler(engine, tasks, interceptors=[OpenTelemetryInterceptor()])

Each execution runs in a span named ``sqla_scheduler.execute {task_name}`` (kind
``CONSUMER``) with the attributes ``task.name``, ``task.instance``,
``task.consecutive_failures``, ``task.priority``, ``task.outcome`` (``success`` or
``failure``) and, only with ``include_payload=True``, ``task.payload`` (its JSON). A
handler's exception is recorded on the span, whose status is then ``ERROR``.

When an instance is scheduled through a scheduler that has the interceptor while a span is
current, the W3C trace context (``traceparent``, ``tracestate``) is stored with the
execution, and the execution's span becomes a child of that span (``link=True`` makes it
a new trace linked to it instead). Give the interceptor to the scheduler the web process
schedules with, as well as to the workers'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sqla_scheduler._extras import missing_extra

try:
    from opentelemetry import propagate, trace
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
except ImportError as exc:  # pragma: no cover - exercised without the extra
    raise missing_extra(__name__, "OpenTelemetry", "otel") from exc

from sqla_scheduler import __version__
from sqla_scheduler.context import ExecutionContext
from sqla_scheduler.interceptors import CallNext, ExecutionInterceptor

__all__ = ["OpenTelemetryInterceptor"]

#: The instrumentation scope the spans are reported under.
TRACER_NAME = "sqla_scheduler"


class OpenTelemetryInterceptor(ExecutionInterceptor):
    """Trace each execution in a span; carry the scheduling request's trace context.

    ``tracer_provider`` defaults to the global one. ``include_payload`` adds the payload's
    JSON as ``task.payload`` (payloads may hold personal data: off by default). ``link``
    starts each execution's span in a trace of its own, linked to the scheduling span,
    rather than as its child (for long-delayed executions that would stretch a trace).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        include_payload: bool = False,
        link: bool = False,
    ) -> None:
        self.tracer = trace.get_tracer(TRACER_NAME, __version__, tracer_provider=tracer_provider)
        self.include_payload = include_payload
        self.link = link

    def capture_context(self) -> Mapping[str, str] | None:
        """The current W3C trace context, if a span is current."""
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        return carrier or None

    async def intercept(self, context: ExecutionContext[Any], call_next: CallNext) -> Any:
        """Run the handler in a span that records its outcome."""
        parent = None
        links: list[Link] = []
        if context.trace_context:
            scheduled_in = propagate.extract(dict(context.trace_context))
            if self.link:
                span_context = trace.get_current_span(scheduled_in).get_span_context()
                if span_context.is_valid:
                    links.append(Link(span_context))
            else:
                parent = scheduled_in
        attributes: dict[str, Any] = {
            "task.name": context.task_name,
            "task.instance": context.instance_id,
            "task.consecutive_failures": context.consecutive_failures,
            "task.priority": context.priority,
        }
        if self.include_payload:
            attributes["task.payload"] = json.dumps(context.payload, default=str)
        with self.tracer.start_as_current_span(
            f"sqla_scheduler.execute {context.task_name}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                result = await call_next()
            except Exception as exc:
                span.set_attribute("task.outcome", "failure")
                span.record_exception(exc)
                span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
                raise
            except BaseException:
                # Cancelled: the scheduler is stopping and releases the execution.
                span.set_attribute("task.outcome", "released")
                raise
            span.set_attribute("task.outcome", "success")
            return result
