"""After it: each task name reaches the scheduler that registers it."""

for name in ("charge-card", "send-invoice", "build-report"):
    assert name in scheduler_for(name).tasks, name
