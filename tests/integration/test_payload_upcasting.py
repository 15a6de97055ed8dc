"""Payload versions across a deploy, on every database and engine mode: rows written by a
task's version-1 definition run under its version-3 definition (two upcasters), rows the
version-3 definition writes are not upcast, and a payload that cannot be brought up goes
to history as undecodable, where requeue brings it back after a fix."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from sqla_scheduler import (
    FixedDelay,
    HistoryEntry,
    ManualClock,
    NextAt,
    Scheduler,
    custom,
    one_time,
    recurring,
)
from tests.support import NOW, Harness

pytestmark = pytest.mark.anyio

MINUTE = timedelta(minutes=1)


@dataclasses.dataclass
class Resize:
    """Version 3: version 1's ``path`` became ``source`` in version 2; 3 added ``width``."""

    source: str
    width: int


class Upcasters:
    """Version 1 to 2 and 2 to 3, counting their calls; ``fixed`` also reads the ``name``
    that some version-1 payloads have instead of ``path``."""

    def __init__(self, *, fixed: bool = False) -> None:
        self.fixed = fixed
        self.calls: Counter[int] = Counter()

    def to_v2(self, data: dict[str, Any]) -> dict[str, Any]:
        self.calls[1] += 1
        return {"source": data["name"] if self.fixed and "name" in data else data["path"]}

    def to_v3(self, data: dict[str, Any]) -> dict[str, Any]:
        self.calls[2] += 1
        return {**data, "width": 640}

    def as_mapping(self) -> dict[int, Any]:
        return {1: self.to_v2, 2: self.to_v3}


def _resize_v1(seen: list[Any]) -> Any:
    return one_time("resize")(lambda ctx: seen.append(ctx.payload))


def _resize_v3(seen: list[Any], upcasters: Upcasters) -> Any:
    return one_time(
        "resize", payload_type=Resize, payload_version=3, upcasters=upcasters.as_mapping()
    )(lambda ctx: seen.append((ctx.instance_id, ctx.payload)))


async def _versions(db: Harness, scheduler: Scheduler, task: str) -> dict[str, int]:
    """Each execution of ``task`` by instance id: the version its payload was written with."""
    found = await db.resolve(scheduler.executions(db.engine, task_name=task))
    return {e.instance_id: e.payload_version for e in found}


async def test_rows_written_by_version_1_run_under_version_3(
    db: Harness, clock: ManualClock
) -> None:
    # The old deploy schedules work and stops.
    old = db.scheduler([_resize_v1([])], clock, scheduler_name="v1")
    v1 = old._tasks["resize"]
    assert await db.resolve(old.schedule(db.engine, v1.instance("a", {"path": "a.png"})))
    batch = [v1.instance(i, {"path": f"{i}.png"}) for i in ("b", "c")]
    assert await db.resolve(old.schedule_batch(db.engine, batch)) == 2
    assert await _versions(db, old, "resize") == {"a": 1, "b": 1, "c": 1}

    # The new deploy schedules work of its own, then runs everything.
    seen: list[Any] = []
    upcasters = Upcasters()
    new = db.scheduler([_resize_v3(seen, upcasters)], clock, scheduler_name="v3")
    v3 = new._tasks["resize"]
    assert await db.resolve(new.schedule(db.engine, v3.instance("d", Resize("d.png", 10))))
    batch = [v3.instance(i, Resize(f"{i}.png", 20)) for i in ("e", "f")]
    assert await db.resolve(new.schedule_batch(db.engine, batch)) == 2
    async with db.session() as session:  # in the caller's transaction too
        assert await db.resolve(new.schedule(session, v3.instance("g", Resize("g.png", 30))))
        await db.commit(session)
    assert await _versions(db, new, "resize") == {
        **{"a": 1, "b": 1, "c": 1},
        **{"d": 3, "e": 3, "f": 3, "g": 3},
    }
    assert (await db.resolve(new.get_execution(db.engine, "resize", "a"))).to_json()[
        "payload_version"
    ] == 1

    assert await new.run_due() == 7
    assert sorted(seen) == [
        ("a", Resize("a.png", 640)),
        ("b", Resize("b.png", 640)),
        ("c", Resize("c.png", 640)),
        ("d", Resize("d.png", 10)),
        ("e", Resize("e.png", 20)),
        ("f", Resize("f.png", 20)),
        ("g", Resize("g.png", 30)),
    ]
    # only the three version-1 payloads were upcast, each by both upcasters
    assert upcasters.calls == {1: 3, 2: 3}
    assert db.count() == 0


async def test_a_handlers_new_payload_and_follow_ups_are_written_at_their_tasks_version(
    db: Harness, clock: ManualClock
) -> None:
    """A recurring or custom task's row keeps its payload's version while the handler keeps
    the payload, and takes the task's version when the handler gives a new one; what a
    handler schedules is written at its own task's version."""
    report_v1 = recurring(
        "report", FixedDelay(MINUTE, initial_delay=MINUTE), initial_payload={"path": "r.png"}
    )(lambda ctx: None)
    poll_v1 = custom("poll")(lambda ctx: None)
    old = db.scheduler([report_v1, poll_v1], clock, scheduler_name="v1")
    assert await old.run_due() == 0  # registers the recurring row, due in a minute
    assert await db.resolve(old.schedule(db.engine, poll_v1.instance("p", {"path": "p.png"})))
    assert await _versions(db, old, "report") == {"recurring": 1}

    returns: list[Any] = [None, Resize("new.png", 1), None]
    seen: list[Any] = []
    upcasters = Upcasters()
    thumbnail = one_time("thumbnail", payload_version=2, upcasters={1: lambda data: data})(
        lambda ctx: None
    )

    def report(ctx: Any) -> Any:
        seen.append(ctx.payload)
        if len(seen) == 1:
            later = clock.now() + timedelta(hours=1)  # looked at before it runs
            ctx.schedule(thumbnail.instance("t1", {"of": ctx.payload.source}, at=later))
        return returns.pop(0)

    report_v3 = recurring(
        "report",
        FixedDelay(MINUTE, initial_delay=MINUTE),
        payload_type=Resize,
        initial_payload=Resize("initial.png", 0),
        payload_version=3,
        upcasters=upcasters.as_mapping(),
    )(report)
    polled: list[Any] = []

    def poll(ctx: Any) -> NextAt[Any]:
        polled.append(ctx.payload)
        later = clock.now() + MINUTE
        return NextAt(later) if len(polled) == 1 else NextAt(later, Resize("polled.png", 2))

    poll_v3 = custom(
        "poll",
        payload_type=Resize,
        payload_version=3,
        upcasters={1: upcasters.to_v2, 2: upcasters.to_v3},
    )(poll)
    new = db.scheduler([report_v3, poll_v3, thumbnail], clock, scheduler_name="v3")

    # first run: both handlers keep their payloads, so the rows keep version 1
    clock.advance(MINUTE)
    assert await new.run_due() == 2
    assert seen == [Resize("r.png", 640)]
    assert polled == [Resize("p.png", 640)]
    assert await _versions(db, new, "report") == {"recurring": 1}
    assert await _versions(db, new, "poll") == {"p": 1}
    assert db.row("report", "recurring")["task_data"] == {"path": "r.png"}  # type: ignore[index]
    assert await _versions(db, new, "thumbnail") == {"t1": 2}

    # second run: both return new payloads, written at version 3
    clock.advance(MINUTE)
    assert await new.run_due() == 2
    assert await _versions(db, new, "report") == {"recurring": 3}
    assert await _versions(db, new, "poll") == {"p": 3}
    assert db.row("poll", "p")["task_data"] == {"source": "polled.png", "width": 2}  # type: ignore[index]

    # third run: the version-3 payloads are read as they are
    calls = dict(upcasters.calls)
    clock.advance(MINUTE)
    assert await new.run_due() == 2
    assert seen[-1] == Resize("new.png", 1)
    assert polled[-1] == Resize("polled.png", 2)
    assert upcasters.calls == calls


async def test_a_payload_that_cannot_be_brought_up_is_undecodable_until_a_fix(
    db: Harness, clock: ManualClock
) -> None:
    old = db.scheduler([_resize_v1([])], clock, scheduler_name="v1")
    v1 = old._tasks["resize"]
    good, bad = v1.instance("good", {"path": "g.png"}), v1.instance("bad", {"name": "b.png"})
    assert await db.resolve(old.schedule_batch(db.engine, [good, bad])) == 2
    db.put(  # written by a later deploy than the one running
        task_name="resize",
        task_instance="newer",
        task_data={"source": "n.png", "width": 1, "height": 1},
        execution_time=NOW,
        payload_version=7,
    )

    seen: list[Any] = []
    buggy = db.scheduler([_resize_v3(seen, Upcasters())], clock, scheduler_name="v3")
    await buggy.run_due()
    assert seen == [("good", Resize("g.png", 640))]  # the others affect themselves alone
    assert db.count() == 0
    entries: list[HistoryEntry] = await db.resolve(buggy.history(db.engine, outcome="undecodable"))
    by_instance = {e.instance_id: e for e in entries}
    assert {i: (e.data, e.payload_version) for i, e in by_instance.items()} == {
        "bad": ({"name": "b.png"}, 1),
        "newer": ({"source": "n.png", "width": 1, "height": 1}, 7),
    }
    assert "upcasters[1] (version 1 to 2) failed" in str(by_instance["bad"].error)
    assert "stored payload has version 7; this task reads versions 1 to 3" in str(
        by_instance["newer"].error
    )

    # After the fix, requeue puts each back as it was, version included.
    fixed = db.scheduler([_resize_v3(seen, Upcasters(fixed=True))], clock, scheduler_name="fix")
    for entry in entries:
        assert await db.resolve(fixed.requeue(db.engine, entry.id)) is True
    assert await _versions(db, fixed, "resize") == {"bad": 1, "newer": 7}
    assert db.row("resize", "newer")["task_data"] == {  # type: ignore[index]
        "source": "n.png",
        "width": 1,
        "height": 1,
    }
    assert await db.resolve(fixed.cancel(db.engine, "resize", "newer"))  # its deploy's to run
    assert await fixed.run_due() == 1
    assert seen[-1] == ("bad", Resize("b.png", 640))
