"""After it: the application's scheduler is in ``app.extensions`` and idle until the first
request, which starts its loop (stopped at exit, as init_app registered); an order and its
confirmation commit together, a refused order leaves neither, and the loop runs the
confirmation as soon as the request commits (SQLite has no NOTIFY and the loop polls every
10 s: the commit itself wakes it)."""

app = create_application()
running = app.extensions["sqla_scheduler"]
assert isinstance(running, Scheduler)
assert not running.running, "the loop started before any request"

client = app.test_client()
placed = client.post("/orders", json={"id": 1, "customer": "ada@example.com"})
assert (placed.status_code, placed.json) == (201, {"id": 1}), placed.text
assert running.running, "the first request did not start the loop"
refused = client.post("/orders", json={"id": 2, "customer": "eve@blocked.example"})
assert refused.status_code == 422, refused.text

with Session(running.engine) as session:
    assert session.get(Order, 1) is not None
    assert session.get(Order, 2) is None
assert running.get_execution(running.engine, "send-confirmation", "order-2") is None
assert confirmed.wait(5), "the confirmation did not run within 5 s of the commit"
assert sent == [1]
