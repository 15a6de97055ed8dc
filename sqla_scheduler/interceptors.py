"""Wrap executions: timing, tracing, metrics, anything that goes around a handler.

Subclass ``ExecutionInterceptor``, override ``intercept`` and pass instances as
``Scheduler(..., interceptors=[...])``. The first interceptor is the outermost: each one
awaits ``call_next()`` to run the rest of the chain and, at its end, the handler (a sync
handler still runs in a worker thread inside ``call_next``)::

    class Timing(ExecutionInterceptor):
        async def intercept(self, context, call_next):
            started = time.monotonic()
            try:
                return await call_next()
            finally:
                log.info("%s took %.3fs", context.task_name, time.monotonic() - started)

An interceptor sees the handler's result (``call_next`` returns it) and its exception
(``call_next`` raises it). Return the result and let exceptions propagate: what the chain
returns or raises is what the scheduler records as the execution's outcome, so an
interceptor that swallows an exception turns a failure into a success.

Interceptors differ from ``SchedulerListener``: they run around the handler, in its task and
context (a span they open is current in the handler), while listeners are told about
outcomes after the fact, once they are committed. An interceptor only wraps the handler;
retries, abandoning and committing happen outside.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from sqla_scheduler.context import ExecutionContext

__all__ = ["CallNext", "ExecutionInterceptor"]

CallNext = Callable[[], Awaitable[Any]]
"""What an interceptor awaits to run the rest of the chain; returns the handler's result."""


class ExecutionInterceptor:
    """Base class of interceptors; by default it runs the rest of the chain unchanged."""

    async def intercept(self, context: ExecutionContext[Any], call_next: CallNext) -> Any:
        """Run around one execution's handler; return what ``call_next()`` returns.

        ``context`` is the handler's context. Exceptions from ``call_next()`` should
        propagate (re-raise after recording them): they decide the outcome.
        """
        return await call_next()

    def capture_context(self) -> Mapping[str, str] | None:
        """Called when instances are scheduled; what it returns is stored with them.

        Whatever the interceptors of the scheduling ``Scheduler`` return is merged and
        stored in the execution's ``trace_context`` column, and handed back to the
        interceptors of the executing scheduler as ``context.trace_context``. Used to carry
        a trace context (W3C ``traceparent``) from the request that scheduled an
        execution to the execution. The default captures nothing (and is never called).
        """
        return None


def captures_context(interceptor: ExecutionInterceptor) -> bool:
    """Whether ``interceptor`` overrides ``ExecutionInterceptor.capture_context``."""
    method = getattr(type(interceptor), "capture_context", None)
    return method is not ExecutionInterceptor.capture_context


def capture(interceptors: Sequence[ExecutionInterceptor]) -> dict[str, str] | None:
    """The merged contexts ``interceptors`` capture now; ``None`` when there is none."""
    captured: dict[str, str] = {}
    for interceptor in interceptors:
        found = interceptor.capture_context()
        if found:
            captured.update(found)
    return captured or None


async def run_chain(
    interceptors: Sequence[ExecutionInterceptor],
    context: ExecutionContext[Any],
    handler: CallNext,
) -> Any:
    """Run ``handler`` inside ``interceptors``, the first one outermost."""

    async def step(index: int) -> Any:
        if index == len(interceptors):
            return await handler()
        return await interceptors[index].intercept(context, lambda: step(index + 1))

    return await step(0)
