"""Optional integrations, each behind an extra.

- ``sqla_scheduler.integrations.opentelemetry`` (``pip install sqla-scheduler[otel]``):
  a span per execution that continues the trace of the request that scheduled it.
- ``sqla_scheduler.integrations.prometheus`` (``pip install sqla-scheduler[prometheus]``):
  execution counters and histograms, and gauges of the table's state.
- ``sqla_scheduler.integrations.flask`` (``pip install sqla-scheduler[flask]``):
  ``init_app(app, scheduler)`` runs the scheduler in the processes that serve the
  application, and in no other.
"""
