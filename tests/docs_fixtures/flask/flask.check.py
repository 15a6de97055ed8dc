"""After it: the application runs the loop on a thread from its creation (stopped at exit,
as registered), an order and its confirmation commit together, a refused order leaves
neither, and the loop runs the confirmation as soon as the request commits (SQLite has no
NOTIFY and the loop polls every 10 s: the commit itself wakes it)."""

import gc

app = create_application()
(running,) = [o for o in gc.get_objects() if isinstance(o, Scheduler) and o.running]

client = app.test_client()
placed = client.post("/orders", json={"id": 1, "customer": "ada@example.com"})
assert (placed.status_code, placed.json) == (201, {"id": 1}), placed.text
refused = client.post("/orders", json={"id": 2, "customer": "eve@blocked.example"})
assert refused.status_code == 422, refused.text

with Session(running.engine) as session:
    assert session.get(Order, 1) is not None
    assert session.get(Order, 2) is None
assert running.get_execution(running.engine, "send-confirmation", "order-2") is None
assert confirmed.wait(5), "the confirmation did not run within 5 s of the commit"
assert sent == [1]
