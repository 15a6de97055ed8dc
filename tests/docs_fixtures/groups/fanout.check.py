"""After it: the group counted every customer and finished with every statement
rendered; each member's value is kept under the group, though its task keeps no results,
and the callback left the table once it ran."""

assert (group.total, group.remaining) == (1000, 1000)  # as schedule_group returned it
progress = scheduler.group(engine, group.id)
assert (progress.total, progress.remaining, progress.done) == (1000, 0, 1000)
assert progress.finished
assert progress.finished_at is not None
assert dict(progress.outcomes) == {"succeeded": 1000}
assert progress.members == ()  # only a callback's ctx.group carries them
first = scheduler.result(engine, "render-statement", "statement-2030-05-1")
assert first.value == {"customer_id": 1, "url": "/statements/2030-05/1.pdf"}
assert scheduler.get_execution(engine, "email-statements", "statements-2030-05") is None
engine.dispose()
