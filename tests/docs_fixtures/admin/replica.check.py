"""After it: the scheduler writes through its engine and reads the page through the other."""

assert scheduler.engine is engine
assert scheduler.read_engine is not engine
assert str(scheduler.read_engine.url) == REPLICA_URL
