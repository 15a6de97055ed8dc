"""A stop request without a database: its NOTIFY payload, what a stopped execution comes
to in the outcome policy, the held execution's stop, and the handler's signal."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from sqla_scheduler import ExecutionCancelled, FixedDelay, one_time, recurring
from sqla_scheduler._dialects import (
    notice_of_pause,
    notice_of_stop,
    read_notice,
    read_pause_notice,
    read_stop_notice,
)
from sqla_scheduler._execution import Execution
from sqla_scheduler._runner import outcomes
from sqla_scheduler._runner.held import Held
from sqla_scheduler._store import Completion
from sqla_scheduler.context import ShutdownSignal
from sqla_scheduler.testing import build_context
from tests.support.builders import execution_at
from tests.support.clocks import NOW


def noop(ctx: Any) -> None: ...


def called(scope: anyio.CancelScope) -> bool:
    """Whether ``scope`` was cancelled (read afresh: it changes under the test's feet)."""
    return scope.cancel_called


@pytest.mark.parametrize("instance_id", ["a", 'quote"d', "{}", '"paused"', "\u00e9t\u00e9"])
def test_a_stop_notice_names_its_execution_and_is_no_other_notice(instance_id: str) -> None:
    payload = notice_of_stop("export", instance_id)
    assert read_stop_notice(payload) == ("export", instance_id)
    assert read_pause_notice(payload) is None
    assert read_stop_notice(notice_of_pause("export", True)) is None
    assert read_stop_notice("export") is None  # work due now
    assert read_notice(payload) == (payload, None)  # (the listener reads stops first)


@pytest.mark.parametrize(
    "task", [one_time("job")(noop), recurring("job", FixedDelay(timedelta(hours=1)))(noop)]
)
def test_a_stopped_execution_leaves_the_table_as_cancelled(task: Any) -> None:
    execution = execution_at(NOW, picked=True, picked_by="me", consecutive_failures=2)
    done = outcomes.cancelled(
        execution,
        keep_result=outcomes.keeps_result(task, execution),
        now=NOW,
        started_at=NOW - timedelta(seconds=3),
        reason="cancelled: x",
    )
    assert (done.kind, done.outcome, done.error) == ("remove", "cancelled", "cancelled: x")
    assert done.leaves
    assert done.result is None
    entry = done.entry()
    assert (entry.outcome, entry.attempt, entry.started_at) == (
        "cancelled",
        3,
        NOW - timedelta(seconds=3),
    )


def test_a_kept_result_and_a_group_member_keep_cancelled() -> None:
    def cancelled(task: Any, execution: Execution) -> Completion:
        keep = outcomes.keeps_result(task, execution)
        return outcomes.cancelled(execution, keep_result=keep, now=NOW, reason="cancelled: x")

    done = cancelled(one_time("job", keep_result=True)(noop), execution_at(NOW))
    assert done.result is not None
    assert (done.result.outcome, done.result.error) == ("cancelled", "cancelled: x")
    member = execution_at(NOW, group_id=7)
    done = cancelled(one_time("job")(noop), member)
    assert done.result is not None
    assert (done.result.outcome, done.result.group_id) == ("cancelled", 7)


def test_a_held_execution_stopped_before_its_handler_cancels_it_as_it_starts() -> None:
    held = Held(execution_at(NOW))
    cancelled: list[bool] = []

    async def main() -> None:
        with anyio.CancelScope() as scope:
            held.scope = scope
            held.request_stop(cancel_worker=True)
            assert held.cancelled.is_set()
            assert not called(scope)  # not while it only waits to start
            held.enter_handler(NOW)
            assert called(scope)
            try:
                await anyio.sleep(10)
            except anyio.get_cancelled_exc_class():
                cancelled.append(True)
                raise
            finally:
                held.leave_handler()

    anyio.run(main)
    assert cancelled == [True]


def test_a_sync_handlers_stop_leaves_its_worker_alone() -> None:
    held = Held(execution_at(NOW))

    async def main() -> None:
        with anyio.CancelScope() as scope:
            held.scope = scope
            held.enter_handler(NOW)
            held.request_stop(cancel_worker=False)
            assert held.cancelled.is_set()
            assert not called(scope)  # it sees ctx.cancelled; its grace may end it
            held.cancel_handler()
            assert called(scope)
            held.leave_handler()
            await anyio.lowlevel.checkpoint()  # where the worker's wait would end

    anyio.run(main)


def test_the_signal_is_made_when_first_needed_and_reaches_a_waiting_thread() -> None:
    signal = ShutdownSignal()
    child = signal.child()
    assert not signal.is_set
    assert not child.is_set()
    woke = threading.Event()
    waiter = threading.Thread(target=lambda: signal.wait(10) and woke.set())
    waiter.start()
    signal.set()
    waiter.join(10)
    assert woke.is_set()
    assert child.is_set
    assert ShutdownSignal().wait(0) is False


def test_raise_if_cancelled_names_the_execution() -> None:
    task = one_time("export")(noop)
    build_context(task, instance_id="e-1").raise_if_cancelled()  # not asked: nothing
    asked = build_context(task, instance_id="e-1", cancelled=True)
    assert asked.cancelled.is_set()
    with pytest.raises(ExecutionCancelled, match=r"^export/e-1 was cancelled while it ran$"):
        asked.raise_if_cancelled()
