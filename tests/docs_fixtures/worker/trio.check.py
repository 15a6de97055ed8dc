"""After it: every greeting ran under trio and the scheduler let go of the table."""

assert sorted(greeted) == NAMES, greeted
assert web.executions(web.engine) == []
