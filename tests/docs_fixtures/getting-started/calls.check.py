"""After "More calls": once committed, the batch is there but for the cancelled order-7."""

session.commit()
session.close()
left = {execution.instance_id for execution in scheduler.executions(engine)}
assert left == {f"order-{n}" for n in range(1, 11) if n != 7}, left
