"""Every number of a ``SchedulerConfig`` has bounds a deployment never reaches and the loop
handles: any accepted configuration starts, runs and stops within its bounds, and a value
just past a bound is refused naming the key and the bound (issue 29, defects 6 and 11).

SQLite, a few examples: each one starts a real loop.
"""

from __future__ import annotations

import math
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, delete

from sqla_scheduler import ConfigurationError, Scheduler, SchedulerConfig, one_time
from sqla_scheduler.models import table_for
from tests.support import sqlite_file_url

MS, DAY, LONGEST = timedelta(milliseconds=1), timedelta(days=1), timedelta(days=36500)

#: Each bounded key: its lowest and highest accepted values, as docs/configuration.md gives
#: them, and whether the lowest is itself refused (``greater than``).
BOUNDS: dict[str, tuple[Any, Any, bool]] = {
    "concurrency": (1, 1000, False),
    "polling_interval": (MS, DAY, False),
    "heartbeat_interval": (MS, DAY, False),
    "missed_heartbeat_limit": (1, 1000, False),
    "retry_base_delay": (timedelta(0), LONGEST, False),
    "retry_backoff_rate": (1.0, 100.0, False),
    "retry_max_delay": (timedelta(0), LONGEST, False),
    "max_retries": (0, 1_000_000, False),
    "shutdown_max_wait": (timedelta(0), DAY, False),
    "delete_unresolved_after": (MS, LONGEST, False),
    "history_retention": (MS, LONGEST, False),
    "node_heartbeat_interval": (MS, DAY, False),
    "result_retention": (MS, LONGEST, False),
    "max_result_size": (1, 16 * 1024 * 1024, False),
    "cancel_grace": (timedelta(0), DAY, False),
    "pick_lower_fraction": (0.0, 10.0, True),
    "pick_upper_fraction": (0.0, 10.0, True),
}

#: How long a stop may take: the one execution is done, so nothing waits out
#: ``shutdown_max_wait``; what is left is the loop's own winding down.
STOP_WITHIN = 5.0


def _durations(low: timedelta, high: timedelta) -> st.SearchStrategy[timedelta]:
    """Durations from ``low`` to ``high``, the bounds themselves often."""
    return st.one_of(
        st.sampled_from([low, high]),
        st.timedeltas(min_value=low, max_value=high),
    )


@st.composite
def configs(draw: st.DrawFn) -> SchedulerConfig:
    """Any configuration within the bounds, the bounds themselves often."""
    lower = draw(st.floats(0.0, 10.0, exclude_min=True) | st.just(10.0))
    base = draw(_durations(timedelta(0), LONGEST))
    return SchedulerConfig(
        concurrency=draw(st.sampled_from([1, 1000]) | st.integers(1, 1000)),
        polling_interval=draw(_durations(MS, DAY)),
        heartbeat_interval=draw(_durations(MS, DAY)),
        missed_heartbeat_limit=draw(st.sampled_from([1, 1000]) | st.integers(1, 1000)),
        retry_base_delay=base,
        retry_backoff_rate=draw(st.floats(1.0, 100.0)),
        retry_max_delay=draw(_durations(base, LONGEST)),
        max_retries=draw(st.none() | st.integers(0, 1_000_000)),
        shutdown_max_wait=draw(_durations(timedelta(0), DAY)),
        delete_unresolved_after=draw(_durations(MS, LONGEST)),
        history=draw(st.sampled_from(["failures", "all", "none"])),
        history_retention=draw(_durations(MS, LONGEST)),
        node_heartbeat_interval=draw(_durations(MS, DAY)),
        result_retention=draw(_durations(MS, LONGEST)),
        max_result_size=draw(
            st.sampled_from([1, 16 * 1024 * 1024]) | st.integers(1, 16 * 1024 * 1024)
        ),
        cancel_grace=draw(_durations(timedelta(0), DAY)),
        listen=draw(st.booleans()),
        stats=draw(st.booleans()),
        prepared_statements=draw(st.booleans()),
        pick_lower_fraction=lower,
        pick_upper_fraction=draw(st.floats(lower, 10.0)),
        scheduler_name="bounds",
    )


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(config=configs())
def test_any_accepted_configuration_starts_runs_and_stops(
    config: SchedulerConfig, sqlite_template: Path, tmp_path: Path
) -> None:
    engine = create_engine(sqlite_file_url(sqlite_template, tmp_path))
    ran = threading.Event()
    job = one_time("job")(lambda ctx: ran.set())
    scheduler = Scheduler(engine, [job], config)
    try:
        with engine.begin() as conn:
            conn.execute(delete(table_for()))
        scheduler.schedule(engine, job.instance("due"))
        scheduler.start()
        try:
            assert ran.wait(10), f"nothing ran within 10 s with {config}"
        finally:
            began = time.monotonic()
            scheduler.stop()
            took = time.monotonic() - began
        assert took < STOP_WITHIN, f"stop took {took:.1f} s with {config}"
    finally:
        engine.dispose()


def _past(key: str, bound: Any, direction: int) -> st.SearchStrategy[Any]:
    """Values of ``key``'s type past ``bound`` (``direction`` -1: below, 1: above)."""
    if isinstance(bound, timedelta):
        step = st.timedeltas(min_value=timedelta(microseconds=1), max_value=timedelta(days=10**6))
        return step.map(lambda d: bound + direction * d).filter(lambda d: d >= -LONGEST)
    if isinstance(bound, float):
        if direction > 0:
            return st.floats(math.nextafter(bound, math.inf), 1e300)
        return st.floats(-1e300, math.nextafter(bound, -math.inf))
    return st.integers(1, 2**70).map(lambda n: bound + direction * n)


@st.composite
def beyond(draw: st.DrawFn) -> tuple[str, Any, str]:
    """A key, a value just past one of its bounds, and what the message says of it."""
    key = draw(st.sampled_from(sorted(BOUNDS)))
    low, high, above = BOUNDS[key]
    if draw(st.booleans()):
        value = draw(st.just(low) if above else _past(key, low, -1))
        return key, value, f"must be {'greater than' if above else 'at least'} {_shown(low)}"
    return key, draw(_past(key, high, 1)), f"must be at most {_shown(high)}"


def _shown(bound: Any) -> str:
    if isinstance(bound, timedelta):
        return {MS: "1ms", DAY: "1d", LONGEST: "36500d", timedelta(0): "zero"}[bound]
    if isinstance(bound, float):
        return "0" if bound == 0 else f"{bound:.1f}"
    return str(bound)


@settings(max_examples=60, deadline=None)
@given(case=beyond())
def test_a_value_past_a_bound_is_refused_naming_the_key_and_the_bound(
    case: tuple[str, Any, str],
) -> None:
    key, value, reason = case
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig(**{key: value})
    assert str(caught.value).startswith(f"{key}: "), caught.value
    assert reason in str(caught.value), caught.value


@pytest.mark.parametrize("key", sorted(BOUNDS))
def test_the_bounds_themselves_are_accepted(key: str) -> None:
    low, high, above = BOUNDS[key]
    # each of a pair in order (retry delays, pick fractions) with its partner at its bound
    partners = {
        "retry_base_delay": ("retry_max_delay", LONGEST, timedelta(0)),
        "retry_max_delay": ("retry_base_delay", LONGEST, timedelta(0)),
        "pick_lower_fraction": ("pick_upper_fraction", 10.0, 3.0),
        "pick_upper_fraction": ("pick_lower_fraction", 10.0, 1e-9),
    }
    partner, at_high, at_low = partners.get(key, ("listen", True, True))
    assert getattr(SchedulerConfig(**{key: high, partner: at_high}), key) == high
    if not above:
        assert getattr(SchedulerConfig(**{key: low, partner: at_low}), key) == low


def test_the_configuration_page_gives_the_bounds() -> None:
    page = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    for key, (low, high, above) in BOUNDS.items():
        first = f"more than {_shown(low)}," if above else _shown(low)
        assert f"| `{key}` | " in page, key
        row = page.split(f"| `{key}` | ", 1)[1].split("\n", 1)[0]
        assert f" | {first} to {_shown(high)}" in row, (key, row)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"pick_lower_fraction": 3.5},
            "pick_upper_fraction: 3.0 must be at least pick_lower_fraction (3.5)",
        ),
        ({"scheduler_name": "node\x1b[2J"}, r"scheduler_name: 'node\x1b[2J' contains a control"),
        ({"scheduler_name": "node\n2"}, r"scheduler_name: 'node\n2' contains a control"),
        ({"scheduler_name": "a\x00"}, r"scheduler_name: 'a\x00' contains a NUL"),
        ({"scheduler_name": "\ud800"}, r"scheduler_name: '\ud800' contains a lone surrogate"),
    ],
)
def test_names_and_fractions_out_of_order_are_refused(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        SchedulerConfig(**changes)
    assert str(caught.value).startswith(message), caught.value


@pytest.mark.parametrize(
    ("key", "text"),
    [
        ("concurrency", "\u0661\u0662"),  # Arabic-Indic 12: int() reads it
        ("concurrency", "\uff15"),  # a full-width 5
        ("polling_interval", "\uff15s"),
        ("heartbeat_interval", "\u0661\u0662"),
        ("retry_backoff_rate", "\uff11.5"),
        ("max_retries", "\u0663"),
    ],
)
def test_digits_of_other_scripts_are_not_numbers(key: str, text: str) -> None:
    with pytest.raises(ConfigurationError, match=f"^SQLA_SCHEDULER_{key.upper()}: {text!r} is not"):
        SchedulerConfig.from_env(environ={f"SQLA_SCHEDULER_{key.upper()}": text})
