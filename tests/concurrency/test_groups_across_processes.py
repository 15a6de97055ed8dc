"""Groups across real worker processes, one of them killed (SIGKILL) half way: every
callback runs exactly once, after the last of its members finished, and sees each
member's final outcome; no member is counted twice."""

from __future__ import annotations

import json
import os
import random
import signal
from typing import Any

import pytest
from sqlalchemy import Engine

from sqla_scheduler import TaskInstance
from tests.concurrency.app import build_scheduler, engine_of, one_time_task
from tests.support.faults import FAST
from tests.support.workers import Workers, rows, scalar, wait_until

#: What a member's payload makes it come to (see ``gmember`` and ``gtyped`` in the app).
FINAL = {
    "ok": "succeeded",
    "flaky": "succeeded",
    "abandon": "abandoned",
    "undecodable": "undecodable",
    "cancel": "cancelled",
}
KINDS, WEIGHTS = zip(
    *{"ok": 60, "flaky": 15, "abandon": 8, "undecodable": 7, "cancel": 10}.items(), strict=True
)


def _member(group: int, n: int, kind: str, later: Any) -> TaskInstance[Any]:
    instance_id = f"g{group}-m{n}-{kind}"
    if kind == "undecodable":  # not a Point: the worker cannot decode it
        return TaskInstance(
            task_name="gtyped",
            instance_id=instance_id,
            data={"y": n},
            execution_time=None,
            priority=0,
        )
    at = later if kind == "cancel" else None  # cancelled before it is due
    return TaskInstance(
        task_name="gmember", instance_id=instance_id, data=kind, execution_time=at, priority=0
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["postgresql", "sqlite", "mariadb"])
def test_random_groups_call_back_exactly_once_through_a_kill(
    workers: Workers, app_db: Engine, db_url: str, backend: str
) -> None:
    """Slow by nature: a dozen random groups (1 to 50 members that succeed, fail once,
    are abandoned after their retries, are undecodable or are cancelled) on three worker
    processes, one killed once a third of the members have run, and a fourth started."""
    seed = int(os.environ.get("GROUP_SEED", random.randrange(10**6)))
    rng = random.Random(seed)
    fast = {"CONCURRENCY": 8, "GROUP_SLEEP_MS": 5, **FAST}
    # w0, the one killed, is slow: it always has members in hand when it dies
    cluster = [
        workers.start(f"w{i}", **{**fast, "GROUP_SLEEP_MS": 300 if i == 0 else 5}) for i in range(3)
    ]
    workers.wait_started(*cluster)

    client = build_scheduler(db_url, name="client")
    callback = one_time_task(client, "gcallback")
    later = client.clock.now().replace(year=2100)
    expected: dict[str, dict[str, str]] = {}
    cancels: list[str] = []
    try:
        for g in range(12):
            kinds = rng.choices(KINDS, WEIGHTS, k=rng.randint(1, 50))
            members = [_member(g, n, kind, later) for n, kind in enumerate(kinds)]
            expected[f"cb-{g}"] = {
                m.instance_id: FINAL[k] for m, k in zip(members, kinds, strict=True)
            }
            cancels += [m.instance_id for m, k in zip(members, kinds, strict=True) if k == "cancel"]
            with app_db.begin() as conn:
                client.schedule_group(conn, members, then=callback.instance(f"cb-{g}"))
        for instance_id in cancels:
            assert client.cancel(app_db, "gmember", instance_id) is True
    finally:
        engine_of(client).dispose()
    total = sum(len(members) for members in expected.values())

    def report() -> str:
        return f"seed {seed}\n{workers.report()}"

    held = "select count(*) from scheduled_tasks where picked_by = 'w0'"

    def stopped_holding() -> bool:
        """Stop w0 (SIGSTOP) and see whether it holds members: it can change nothing
        while stopped, so what it holds then is what it dies with. Resumed if it holds
        none."""
        os.kill(cluster[0].pid, signal.SIGSTOP)
        # A commit w0 sent before it stopped may still land: read until two reads agree.
        counts = [int(scalar(app_db, held)), int(scalar(app_db, held))]
        while counts[-1] != counts[-2]:
            counts.append(int(scalar(app_db, held)))
        if counts[-1] == 0:
            os.kill(cluster[0].pid, signal.SIGCONT)
        return counts[-1] > 0

    wait_until(
        lambda: scalar(app_db, "select count(*) from runs") >= total // 3 and stopped_holding(),
        60,
        "a third of the members to run, w0 holding some",
        report,
    )
    os.kill(cluster[0].pid, signal.SIGKILL)
    assert cluster[0].proc.wait(timeout=30) == -signal.SIGKILL
    held_by_the_dead = scalar(app_db, held)
    assert held_by_the_dead > 0, report()
    workers.wait_started(workers.start("w3", **fast))
    wait_until(
        lambda: (
            scalar(app_db, "select count(*) from scheduled_tasks") == 0
            and scalar(app_db, "select count(*) from callbacks") >= len(expected)
        ),
        90,
        "every group's callback",
        report,
    )

    seen = rows(app_db, "select instance, members, remaining, outcomes from callbacks")
    assert sorted(instance for instance, *_ in seen) == sorted(expected), report()  # once each
    for instance, members, remaining, outcomes in seen:
        assert (members, remaining) == (len(expected[instance]), 0), (seed, instance)
        assert json.loads(outcomes) == expected[instance], (seed, instance)
    counted = rows(
        app_db,
        "select g.total, g.remaining, count(r.id) from scheduled_tasks_groups g "
        "join scheduled_tasks_results r on r.group_id = g.id "
        "where g.task_name = 'gcallback' group by g.id, g.total, g.remaining",
    )
    assert sorted(counted) == sorted((n, 0, n) for n in map(len, expected.values())), seed
    print(
        f"\ngroups ({backend}, seed {seed}): {len(expected)} groups of {total} members, "
        f"one worker killed holding {held_by_the_dead}: every callback ran once, seeing "
        "every member's outcome"
    )
