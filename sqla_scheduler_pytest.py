"""pytest fixtures for the tests of an application that uses sqla-scheduler.

Installed with the package (a ``pytest11`` entry point), so every project that depends on
sqla-scheduler has them. Tell them which scheduler to use by overriding the
``sqla_scheduler`` fixture, in your ``conftest.py``, with one that returns your
application's ``Scheduler`` on a test database::

    @pytest.fixture
    def sqla_scheduler(app):
        return app.extensions["sqla_scheduler"]

- ``scheduler_clock``: a ``ManualClock``, set to the time the test starts, that is the
  clock of ``sqla_scheduler`` for the length of the test (its own is put back after);
  ``scheduler_clock.advance(timedelta(hours=1))`` moves time on.
- ``scheduler_run_due``: ``scheduler_run_due()`` runs every due execution to completion,
  now, with no loop and no waiting, and returns how many ran (a sync engine; with an
  ``AsyncEngine``, ``await sqla_scheduler.run_due()`` in an async test does the same).
- ``scheduler_executions``: a ``sqla_scheduler.testing.ScheduledExecutions``:
  ``scheduler_executions(task)`` lists the executions in the table,
  ``scheduler_executions.assert_scheduled(task, instance_id, at=..., payload=...)`` and
  ``assert_not_scheduled(task, instance_id)`` assert what was scheduled.
- ``scheduler_result``: ``scheduler_result(task, instance_id)`` is the ``Result`` the
  execution of a task with ``keep_result=True`` kept (what its handler returned, or why it
  did not succeed), or ``None`` while it has not run: after ``scheduler_run_due()``.
- ``scheduler_stop``: ``scheduler_stop(task, instance_id)`` asks to stop that execution as
  ``cancel`` asks a running one, the request reaching its handler as it starts in the
  next ``scheduler_run_due()``: a sync handler finds ``ctx.cancelled`` set
  (``ctx.raise_if_cancelled()`` raises), an async one is cancelled at its first wait, a
  transactional one's writes are rolled back, and the execution ends ``cancelled``.

The scheduler's loop must not be running during such a test: the fixtures decide when
executions run, and on which clock.

This module imports pytest alone, and the fixtures import sqla-scheduler (and with it
SQLAlchemy) when a test uses one: a test session that uses none of them pays nothing for
the plugin, and it adds no option, hook or autouse fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from sqla_scheduler import ManualClock, Result, Scheduler
    from sqla_scheduler.tasks import Task
    from sqla_scheduler.testing import ScheduledExecutions

__all__ = [
    "StopRequests",
    "scheduler_clock",
    "scheduler_executions",
    "scheduler_result",
    "scheduler_run_due",
    "scheduler_stop",
    "sqla_scheduler",
]


@pytest.fixture
def sqla_scheduler() -> Scheduler:
    """Your application's scheduler: override this fixture to return it."""
    pytest.fail(
        "the sqla-scheduler fixtures need your scheduler: define a fixture named "
        "`sqla_scheduler` in your conftest.py that returns your application's Scheduler, "
        "on a migrated test database",
        pytrace=False,
    )


@pytest.fixture
def scheduler_clock(sqla_scheduler: Scheduler) -> Iterator[ManualClock]:
    """A manual clock, set to now, that is ``sqla_scheduler``'s clock during the test."""
    from sqla_scheduler import ManualClock

    if sqla_scheduler.running:
        pytest.fail(
            f"{sqla_scheduler!r} is running: the sqla-scheduler fixtures run its executions "
            "themselves, so do not start its loop in this test",
            pytrace=False,
        )
    clock = ManualClock()
    own = sqla_scheduler.clock
    sqla_scheduler.clock = clock
    try:
        yield clock
    finally:
        sqla_scheduler.clock = own


class StopRequests:
    """``scheduler_stop``: the executions to stop as their handlers start in the next
    ``scheduler_run_due()``."""

    def __init__(self) -> None:
        self.keys: set[tuple[str, str]] = set()

    def __call__(self, task: Task[Any] | str, instance_id: str) -> None:
        """Ask to stop the execution of ``task`` with ``instance_id`` as it starts."""
        self.keys.add((task if isinstance(task, str) else task.name, instance_id))

    def take(self) -> set[tuple[str, str]]:
        """The requests made since the last ``take``; none are kept."""
        keys, self.keys = self.keys, set()
        return keys


@pytest.fixture
def scheduler_run_due(
    request: pytest.FixtureRequest, sqla_scheduler: Scheduler, scheduler_clock: ManualClock
) -> Callable[[], int]:
    """``scheduler_run_due()`` runs every due execution to completion; returns how many ran
    (those ``scheduler_stop`` named, stopped as their handlers start)."""
    from sqla_scheduler.testing import run_due

    def run() -> int:
        stops: StopRequests | None = None
        if "scheduler_stop" in request.fixturenames:
            stops = request.getfixturevalue("scheduler_stop")
        return run_due(sqla_scheduler, stop=() if stops is None else stops.take())

    return run


@pytest.fixture
def scheduler_stop(scheduler_run_due: Callable[[], int]) -> StopRequests:
    """``scheduler_stop(task, instance_id)``: stop that execution as its handler starts in
    the next ``scheduler_run_due()``, as ``cancel`` stops a running one."""
    return StopRequests()


@pytest.fixture
def scheduler_executions(
    sqla_scheduler: Scheduler, scheduler_clock: ManualClock
) -> Iterator[ScheduledExecutions]:
    """What ``sqla_scheduler``'s table holds: list it, assert what was scheduled."""
    from sqla_scheduler.testing import ScheduledExecutions

    with ScheduledExecutions(sqla_scheduler) as executions:
        yield executions


@pytest.fixture
def scheduler_result(
    scheduler_executions: ScheduledExecutions,
) -> Callable[[Task[Any] | str, str], Result | None]:
    """``scheduler_result(task, instance_id)``: the result the execution kept, or ``None``
    (read through a sync engine, in async tests too)."""
    return scheduler_executions.result
