"""After it: the loop stopped, and the kept result reads back the same without waiting."""

assert not scheduler.running
assert scheduler.result(engine, "render-report", key) == result
assert scheduler.get_execution(engine, "render-report", key) is None  # it left the table
