"""The pytest plugin (``sqla_scheduler_pytest``, a ``pytest11`` entry point), as a user's
test session sees it: ``pytester`` runs small test files in a pytest of their own against
a migrated SQLite file."""

from __future__ import annotations

import pytest

from sqla_scheduler import migrate

CONFTEST = """
import shutil
from datetime import timedelta

import pytest
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import create_async_engine

from sqla_scheduler import ExecutionContext, Scheduler, Snooze, one_time

ran = []


@one_time("remind", payload_type=str)
def remind(ctx: ExecutionContext[str]) -> None:
    ran.append(ctx.payload)


@one_time("count-words", payload_type=str, keep_result=True)
def count_words(ctx: ExecutionContext[str]) -> dict[str, int]:
    return {"words": len(ctx.payload.split())}


@one_time("charge", keep_result=True, max_retries=0)
def charge(ctx: ExecutionContext[None]) -> None:
    raise ValueError(f"card declined for {ctx.instance_id}")


exported = []


@one_time("export", keep_result=True)
def export(ctx: ExecutionContext[None]) -> str:
    for part in range(3):
        ctx.raise_if_cancelled()  # between two parts of the work
    exported.append(ctx.instance_id)
    return "exported"


polls = []


@one_time("poll-export", max_retries=0)
def poll_export(ctx: ExecutionContext[None]) -> None:
    polls.append(ctx.snoozes)
    if ctx.snoozes < 2:
        raise Snooze(timedelta(minutes=5))  # not ready: ask again in 5 minutes


@pytest.fixture
def database(tmp_path):
    shutil.copyfile("app.db", tmp_path / "app.db")  # a fresh copy of the migrated file
    return tmp_path / "app.db"


@pytest.fixture
def sqla_scheduler(database):
    engine = create_engine(f"sqlite:///{database}")
    yield Scheduler(engine, [remind, count_words, charge, export, poll_export])
    engine.dispose()


@pytest.fixture
def anyio_backend():
    return "asyncio"
"""

USER_TESTS = """
from datetime import timedelta

import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from sqla_scheduler import Scheduler
from conftest import charge, count_words, export, exported, poll_export, polls, ran, remind


def test_a_reminder_runs_at_its_time(
    sqla_scheduler, scheduler_clock, scheduler_run_due, scheduler_executions
):
    at = scheduler_clock.now() + timedelta(hours=1)
    assert sqla_scheduler.clock is scheduler_clock
    sqla_scheduler.schedule(sqla_scheduler.engine, remind.instance("r-1", "ada", at=at))
    execution = scheduler_executions.assert_scheduled(remind, "r-1", at=at, payload="ada")
    assert execution.execution_time == at
    assert [e.instance_id for e in scheduler_executions(remind)] == ["r-1"]
    assert scheduler_run_due() == 0
    scheduler_clock.advance(timedelta(hours=1))
    assert scheduler_run_due() == 1
    assert ran == ["ada"]
    scheduler_executions.assert_not_scheduled(remind)


def test_a_result_is_read_once_what_is_due_ran(
    sqla_scheduler, scheduler_clock, scheduler_run_due, scheduler_result
):
    engine = sqla_scheduler.engine
    sqla_scheduler.schedule(engine, count_words.instance("w-1", "to be or not to be"))
    sqla_scheduler.schedule(engine, charge.instance("c-1"))
    sqla_scheduler.schedule(engine, remind.instance("r-4", "dee"))
    assert scheduler_result(count_words, "w-1") is None  # not run yet
    assert scheduler_run_due() == 3
    words = scheduler_result(count_words, "w-1")
    assert (words.outcome, words.value) == ("succeeded", {"words": 6})
    assert words.finished_at == scheduler_clock.now()
    declined = scheduler_result("charge", "c-1")
    assert (declined.outcome, declined.value) == ("abandoned", None)
    assert declined.error.splitlines()[0] == "ValueError: card declined for c-1"
    assert scheduler_result(remind, "r-4") is None  # its task keeps no result


def test_a_stop_reaches_a_handler_as_it_starts(
    sqla_scheduler, scheduler_run_due, scheduler_stop, scheduler_result
):
    engine = sqla_scheduler.engine
    sqla_scheduler.schedule(engine, export.instance("e-1"))
    sqla_scheduler.schedule(engine, export.instance("e-2"))
    scheduler_stop(export, "e-1")
    assert scheduler_run_due() == 2
    assert scheduler_result(export, "e-1").outcome == "cancelled"
    assert scheduler_result(export, "e-2").value == "exported"
    assert exported == ["e-2"]  # e-1 raised at its first check
    sqla_scheduler.schedule(engine, export.instance("e-3"))
    assert scheduler_run_due() == 1  # a request is used once
    assert scheduler_result(export, "e-3").outcome == "succeeded"


def test_a_snooze_runs_again_once_the_clock_has_moved(
    sqla_scheduler, scheduler_clock, scheduler_run_due, scheduler_executions
):
    sqla_scheduler.schedule(sqla_scheduler.engine, poll_export.instance("p-1"))
    for snoozes in (1, 2):
        assert scheduler_run_due() == 1
        at = scheduler_clock.now() + timedelta(minutes=5)
        waiting = scheduler_executions.assert_scheduled(poll_export, "p-1", at=at)
        assert (waiting.snoozes, waiting.consecutive_failures) == (snoozes, 0)
        scheduler_clock.advance(timedelta(minutes=5) - timedelta(microseconds=1))
        assert scheduler_run_due() == 0  # not due before the snooze's time
        scheduler_clock.advance(timedelta(microseconds=1))
    assert scheduler_run_due() == 1
    assert polls == [0, 1, 2]  # ctx.snoozes as each run saw it
    scheduler_executions.assert_not_scheduled(poll_export)


def test_the_clock_is_the_schedulers_own_again_after_a_test(sqla_scheduler):
    assert type(sqla_scheduler.clock).__name__ == "SystemClock"


def test_a_wrong_time_fails_saying_why(sqla_scheduler, scheduler_clock, scheduler_executions):
    sqla_scheduler.schedule(sqla_scheduler.engine, remind.instance("r-2", "bob"))
    scheduler_executions.assert_scheduled("remind", "r-2", at=scheduler_clock.now())
    scheduler_executions.assert_scheduled("remind", "r-2", payload="eve")


def test_a_missing_execution_fails_saying_why(scheduler_executions):
    scheduler_executions.assert_scheduled("remind", "nope")


@pytest.mark.anyio
async def test_with_an_async_engine(database, scheduler_clock, scheduler_executions):
    engine = create_async_engine(f"sqlite+aiosqlite:///{database}")
    scheduler = Scheduler(engine, [remind], clock=scheduler_clock)
    await scheduler.schedule(engine, remind.instance("r-3", "cy"))
    scheduler_executions.assert_scheduled(remind, "r-3", at=scheduler_clock.now(), payload="cy")
    assert await scheduler.run_due() == 1
    scheduler_executions.assert_not_scheduled(remind, "r-3")
    await engine.dispose()


@pytest.mark.anyio
async def test_results_with_an_async_engine(database, scheduler_clock, scheduler_result):
    engine = create_async_engine(f"sqlite+aiosqlite:///{database}")
    scheduler = Scheduler(engine, [count_words], clock=scheduler_clock)
    await scheduler.schedule(engine, count_words.instance("w-2", "read me"))
    assert await scheduler.run_due() == 1
    assert scheduler_result(count_words, "w-2").value == {"words": 2}  # no await: a sync read
    await engine.dispose()
"""


def test_the_fixtures_drive_a_users_scheduler(pytester: pytest.Pytester) -> None:
    migrate.upgrade(f"sqlite:///{pytester.path / 'app.db'}")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=7, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*AssertionError: 'remind'/'r-2' has the payload 'bob', not 'eve'",
            "*AssertionError: no execution of 'remind' with instance id 'nope' is scheduled*",
        ],
        consecutive=False,
    )


def _errs_once_saying(pytester: pytest.Pytester, message: str) -> None:
    """Run the tests ``pytester`` holds in a subprocess: one of them errs, and the output
    says ``message``."""
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*{message}*"])


def test_without_an_override_the_fixtures_say_what_to_do(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_user="""
        def test_uses_the_clock(scheduler_clock):
            pass
        """
    )
    _errs_once_saying(pytester, "define a fixture named `sqla_scheduler` in your conftest.py")


def test_a_running_loop_is_refused(pytester: pytest.Pytester) -> None:
    migrate.upgrade(f"sqlite:///{pytester.path / 'app.db'}")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_user="""
        import pytest

        @pytest.fixture
        def sqla_scheduler(sqla_scheduler):
            sqla_scheduler.start()
            yield sqla_scheduler
            sqla_scheduler.stop()

        def test_uses_the_clock(scheduler_clock):
            pass
        """
    )
    _errs_once_saying(pytester, "is running: the sqla-scheduler fixtures run its executions")


def test_a_session_that_uses_no_fixture_imports_nothing_of_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_user="""
        import sys

        def test_nothing_heavy_was_imported(request):
            assert "sqla_scheduler_pytest" in sys.modules  # the plugin is loaded
            assert request.config.pluginmanager.has_plugin("sqla_scheduler")
            assert "sqla_scheduler" not in sys.modules
            assert "sqlalchemy" not in sys.modules
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
