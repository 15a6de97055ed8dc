"""After it: the loop ran the confirmation and registered the recurring task, then stopped."""

assert sent == ["ada@example.com"], sent
assert scheduler.get_execution(scheduler.engine, "purge-carts", "recurring") is not None
assert not scheduler.running
