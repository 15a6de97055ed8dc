"""The package's public surface."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

import sqla_scheduler
from sqla_scheduler import ManualClock, Scheduler
from sqla_scheduler.exceptions import TaskDefinitionError, UnknownTaskError


def test_all_is_sorted_and_complete() -> None:
    public = {
        name
        for name in dir(sqla_scheduler)
        if not name.startswith("_")
        and not isinstance(getattr(sqla_scheduler, name), type(sqla_scheduler))  # submodules
    }
    assert len(set(sqla_scheduler.__all__)) == len(sqla_scheduler.__all__)  # ruff keeps it sorted
    assert set(sqla_scheduler.__all__) - {"__version__"} == public


def test_every_public_name_has_a_docstring() -> None:
    for name in sqla_scheduler.__all__:
        value = getattr(sqla_scheduler, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"{name} has no docstring"


def test_implementation_modules_are_private() -> None:
    public_modules = {
        "alembic", "cli", "clock", "config", "context", "exceptions", "executions", "groups",
        "health", "history", "interceptors", "listeners", "migrate", "models", "nodes", "results",
        "scheduler", "schedules", "sqlite", "tasks", "testing", "worker",
    }  # fmt: skip
    found = {
        m.name
        for m in pkgutil.iter_modules(sqla_scheduler.__path__)
        if not m.name.startswith("_") and m.name not in {"admin", "integrations"}  # extras
    }
    assert found == public_modules
    for name in public_modules - {"cli"}:
        importlib.import_module(f"sqla_scheduler.{name}")


def test_manual_clock_moves_only_when_told() -> None:
    start = datetime(2030, 1, 1, tzinfo=timezone.utc)
    clock = ManualClock(start)
    assert clock.now() == start == clock.now()
    assert clock.advance(timedelta(seconds=90)) == start + timedelta(seconds=90)
    with pytest.raises(ValueError, match="non-negative"):
        clock.advance(timedelta(seconds=-1))
    with pytest.raises(ValueError, match="timezone-aware"):
        clock.set(datetime(2030, 1, 1))


def test_scheduler_registry(tmp_path: object) -> None:
    from sqlalchemy import create_engine

    from sqla_scheduler import one_time

    engine = create_engine("sqlite://")
    a = one_time("a")(lambda ctx: None)
    scheduler = Scheduler(engine, [a])
    assert scheduler.task("a") is a
    assert dict(scheduler.tasks) == {"a": a}
    with pytest.raises(UnknownTaskError, match=r"no task 'b' is registered \(known: a\)"):
        scheduler.task("b")
    with pytest.raises(TaskDefinitionError, match="'a' is registered twice"):
        Scheduler(engine, [a, one_time("a")(lambda ctx: None)])
    with pytest.raises(TypeError, match="Engine or AsyncEngine"):
        Scheduler("sqlite://", [a])  # type: ignore[arg-type]
    engine.dispose()


def test_the_core_imports_no_optional_integration() -> None:
    """Scheduling and running import neither OpenTelemetry nor prometheus_client."""
    code = (
        "import sys, sqla_scheduler, sqla_scheduler.scheduler, sqla_scheduler.worker\n"
        "assert not any(m.split('.')[0] in ('opentelemetry', 'prometheus_client')"
        " for m in sys.modules), sorted(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_importing_the_package_imports_only_what_is_used() -> None:
    """``import sqla_scheduler`` loads no SQLAlchemy, and ``sqla-scheduler --help`` no Alembic,
    no ORM and no runner: each process the command line starts pays for what it runs."""
    code = (
        "import sys, sqla_scheduler\n"
        "assert 'sqlalchemy' not in sys.modules, sorted(sys.modules)\n"
        "from sqla_scheduler import ManualClock, Scheduler\n"
        "assert sqla_scheduler.Scheduler is Scheduler\n"
        "assert 'sqla_scheduler.scheduler' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    help_code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from sqla_scheduler.cli import cli\n"
        "assert CliRunner().invoke(cli, ['--help']).exit_code == 0\n"
        "loaded = {m.split('.')[0] for m in sys.modules} | set(sys.modules)\n"
        "heavy = {'alembic', 'sqlalchemy.orm', 'anyio', 'croniter', 'sqla_scheduler.scheduler'}\n"
        "assert not heavy & loaded, sorted(heavy & loaded)\n"
    )
    subprocess.run([sys.executable, "-c", help_code], check=True, timeout=60)
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        sqla_scheduler.Nope  # noqa: B018
