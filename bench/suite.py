"""The suite: which scenarios there are, the order they run in, which databases each runs
on, which raw floor each library figure is compared with, and the target each figure is
held to on each database.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from bench.cli_latency import cli_latency
from bench.composing import big_group, callback_latency, drain_with_group, wait_latency
from bench.control import drain_beside_limited, drain_limited, drain_rated, resume_latency
from bench.floors import floor_batch, floor_drain, floor_single
from bench.harness import Bench
from bench.history import history_drains
from bench.memory import memory
from bench.pooler import drain_pgbouncer, latency_pgbouncer
from bench.processes import PROCESSES, drain_processes
from bench.results import Figure
from bench.scale import scale
from bench.scenarios import (
    beside_plain,
    drain,
    due_lag,
    due_lag_cron,
    due_lag_retry,
    floor_latency,
    latency,
    same_process,
)
from bench.scheduling import schedule_async, schedule_batch, schedule_engine, schedule_session
from bench.soak import CHECKPOINTS, RATE_KEPT, soak
from bench.soak import SETTINGS as SOAK_SETTINGS
from bench.stats import admin_overview, stats_drains
from bench.steering import drain_progress, stop_latency
from bench.transactional import drain_transactional, floor_row_tx

#: The drains measured beside a plain drain of their own (``beside_plain``): their
#: floor is that drain, run in the same rounds, not ``drain_async_1``.
PAIRED = (
    "drain_beside_limited",
    "drain_with_group",
    "drain_rated",
    "drain_progress",
    "drain_pgbouncer",
)
#: Each library figure and the raw floor it is compared with.
FLOOR_OF = {
    "drain_async_1": "floor_drain",
    "drain_sync_1": "floor_drain",
    "drain_async_2": "floor_drain",
    "drain_scale": "drain_async_1",
    "drain_history_failures": "drain_history_none",
    "drain_history_all": "drain_history_none",
    "drain_stats": "drain_stats_off",
    "drain_limited": "drain_async_1",
    **{key: f"{key}_plain" for key in PAIRED},
    "big_group": "big_kept",
    "big_plain": "drain_async_1",
    "big_kept": "big_plain",
    "drain_transactional": "floor_row_tx",
    **{f"drain_processes_{n}": "floor_drain" for n in PROCESSES},
    **{f"drain_processes_{n}_pgbouncer": "floor_drain" for n in (1, *PROCESSES)},
    # the soak's last tenth beside its first
    **{f"soak_{h}_{CHECKPOINTS:02d}": f"soak_{h}_01" for h in SOAK_SETTINGS},
    "latency_p50": "floor_latency_p50",
    "latency_p95": "floor_latency_p95",
    "latency_p99": "floor_latency_p99",
}
SCENARIOS = (
    "floor_drain",
    "floor_single",
    "floor_batch",
    "drain_async_1",
    "drain_sync_1",
    "drain_async_2",
    "scale",
    "history",
    "stats",
    "admin_overview",
    "drain_limited",
    "drain_beside_limited",
    "drain_with_group",
    "big_group",
    "callback_latency",
    "wait_latency",
    "drain_rated",
    "drain_progress",
    "resume",
    "stop_latency",
    "floor_row_tx",
    "drain_transactional",
    "floor_latency",
    "latency",
    "same_process",
    "cli_latency",
    "due_lag",
    "due_lag_cron",
    "due_lag_retry",
    "schedule",
    "schedule_async",
    "schedule_session",
    "schedule_batch",
    "drain_pgbouncer",
    "latency_pgbouncer",
    "processes",
    "soak",
    "memory",
)
#: The scenarios that run on PostgreSQL only, with why: elsewhere their row says so.
POSTGRESQL_ONLY = {
    "scale": "PostgreSQL's SQL (generate_series, VACUUM, EXPLAIN ANALYZE, pg_relation_size)",
    "history": "VACUUM between the drains (PostgreSQL's; not ported)",
    "stats": "VACUUM between the drains (PostgreSQL's; not ported)",
    "admin_overview": "seeded with generate_series (PostgreSQL's)",
    "floor_latency": "LISTEN/NOTIFY, which MariaDB lacks (its probe's lag is the latency row)",
    "drain_pgbouncer": "PgBouncer is PostgreSQL's pooler",
    "processes": "how far one PostgreSQL carries, directly and through PgBouncer",
    "latency_pgbouncer": "PgBouncer is PostgreSQL's pooler",
    "soak": "pg_total_relation_size of the history and queue tables",
    "resume": (
        "rounds 40 ms apart expect a NOTIFY: the probe finds a resumed task within a second,"
        " after later rounds paused it again"
    ),
}
#: Each figure's least ratio to its floor, by database.
RATIO_TARGETS = {
    "postgresql": {
        # issue 35's: the drains close to the per-batch floor, one schedule() per commit
        # close to one INSERT per commit, sync or awaited
        "drain_async_1": 0.75,
        "drain_sync_1": 0.50,
        "schedule": 0.85,
        "schedule_async": 0.85,
        "schedule_batch": 1.00,
        "drain_scale": 0.80,
        "drain_history_failures": 0.90,  # within noise of no history at all
        "drain_history_all": 0.60,
        "drain_stats": 0.95,  # the charts' counts cost the drain at most 5%
        "drain_transactional": 0.70,
        "drain_beside_limited": 0.90,  # a limit does not slow the tasks without one
        "drain_with_group": 0.90,  # a group's count-down does not slow the drain
        "drain_rated": 0.90,  # a rate limit above the drain rate costs it little
        "drain_progress": 0.90,  # issue 48's: reports 100 times a second cost little
        "drain_pgbouncer": 0.70,  # of the direct drain's
        # the soak's last tenth keeps 90% of its first's rate
        **{f"soak_{h}_{CHECKPOINTS:02d}": RATE_KEPT for h in SOAK_SETTINGS},
    },
    "mariadb": {
        "drain_async_1": 0.60,
        "schedule": 0.60,
        "schedule_async": 0.60,
        "schedule_batch": 0.80,
        "drain_beside_limited": 0.90,
        "drain_with_group": 0.90,
        "drain_rated": 0.90,
        "drain_progress": 0.90,
    },
}


def run_all(bench: Bench, only: Sequence[str] = ()) -> None:
    """Run every scenario, or those named in ``only`` and the floors they compare with."""
    bench.prepare_template()
    wanted = set(only) | {
        "drain_async_1" for key in only if key in ("scale", "drain_limited", "big_group")
    }
    wanted |= {"floor_latency" for key in only if key == "latency"}
    wanted |= {"drain_async_1" for key in only if key == "processes"}
    wanted |= {FLOOR_OF[key] for key in wanted if key in FLOOR_OF}

    def s(key: str, label: str, unit: str, run: Callable[[], Figure], name: str = "") -> None:
        scenario = name or key
        if only and scenario not in wanted:
            return
        if bench.server.name != "postgresql" and scenario in POSTGRESQL_ONLY:
            bench.skip(key, label, unit, POSTGRESQL_ONLY[scenario])
        else:
            bench.scenario(key, label, unit, run)

    s("floor_drain", "floor (a) drain", "rows/s", partial(floor_drain, bench))
    s("floor_single", "floor (b) single insert", "inserts/s", partial(floor_single, bench))
    s("floor_batch", "floor (c) executemany", "rows/s", partial(floor_batch, bench))
    for key, label, handler, processes in (
        ("drain_async_1", "drain: 1 process, async handlers", "async", 1),
        ("drain_sync_1", "drain: 1 process, sync handlers", "sync", 1),
        ("drain_async_2", "drain: 2 processes, async handlers", "async", 2),
    ):
        s(
            key,
            label,
            "rows/s",
            partial(drain, bench, key, label, handler, processes),
        )
    s("drain_scale", "scale", "rows/s", lambda: scale(bench)[0], "scale")
    s(
        "drain_history_failures",
        "drain with each history setting",
        "rows/s",
        lambda: history_drains(bench)["drain_history_failures"],
        "history",
    )
    s(
        "drain_stats",
        "drain with the charts' counts on and off",
        "rows/s",
        lambda: stats_drains(bench)["drain_stats"],
        "stats",
    )
    s(
        "admin_overview_p95",
        "admin overview page with charts",
        "ms",
        partial(admin_overview, bench),
        "admin_overview",
    )
    s(
        "drain_limited",
        "drain of a task with max_concurrency",
        "rows/s",
        partial(drain_limited, bench),
    )
    s(
        "drain_beside_limited",
        "drain beside a task with max_concurrency",
        "rows/s",
        partial(beside_plain, bench, "drain_beside_limited", partial(drain_beside_limited, bench)),
    )
    s(
        "drain_with_group",
        "drain with a group finishing beside it",
        "rows/s",
        partial(beside_plain, bench, "drain_with_group", partial(drain_with_group, bench)),
    )
    s(
        "big_group",
        "a group of 100,000 members drained to its callback",
        "rows/s",
        partial(big_group, bench),
    )
    s(
        "callback_latency_p50",
        "last member to callback",
        "ms",
        lambda: callback_latency(bench)[0],
        "callback_latency",
    )
    s(
        "wait_commit_p50",
        "result commit to wait() return",
        "ms",
        lambda: wait_latency(bench)[0],
        "wait_latency",
    )
    s(
        "drain_rated",
        "drain of a task with a rate_limit above the drain rate",
        "rows/s",
        partial(beside_plain, bench, "drain_rated", partial(drain_rated, bench)),
    )
    s(
        "drain_progress",
        "drain of a handler reporting progress 100 times a second",
        "rows/s",
        partial(drain_progress, bench),
    )
    s(
        "resume_p50",
        "resume-to-start latency",
        "ms",
        lambda: resume_latency(bench)[0],
        "resume",
    )
    for handler in ("async", "sync"):
        s(
            f"stop_{handler}_p50",
            f"stop latency, {handler} handler",
            "ms",
            partial(_first, stop_latency, bench, handler),
            "stop_latency",
        )
    s("floor_row_tx", "floor (d) transaction per row", "rows/s", partial(floor_row_tx, bench))
    s(
        "drain_transactional",
        "drain of a transactional task",
        "rows/s",
        partial(drain_transactional, bench),
    )
    s(
        "floor_latency_p50",
        "floor: raw commit-to-pick",
        "ms",
        lambda: floor_latency(bench)[0],
        "floor_latency",
    )
    s("latency_p50", "commit-to-start latency", "ms", lambda: latency(bench)[0], "latency")
    s(
        "cli_latency_p50",
        "commit-to-start latency through the CLI worker, sync handler",
        "ms",
        lambda: cli_latency(bench)[0],
        "cli_latency",
    )
    s(
        "same_process_p50",
        "commit-to-start latency, same process",
        "ms",
        lambda: same_process(bench)[0],
        "same_process",
    )
    s("due_lag_p50", "due-time lag", "ms", lambda: due_lag(bench)[0], "due_lag")
    s(
        "due_lag_cron_p50",
        "due-time lag, cron",
        "ms",
        lambda: due_lag_cron(bench)[0],
        "due_lag_cron",
    )
    s(
        "due_lag_retry_p50",
        "due-time lag, retries",
        "ms",
        lambda: due_lag_retry(bench)[0],
        "due_lag_retry",
    )
    s("schedule", "schedule, one per transaction", "inserts/s", partial(schedule_engine, bench))
    s("schedule_async", "await schedule, async engine", "inserts/s", partial(schedule_async, bench))
    s(
        "schedule_session",
        "schedule in a Session transaction",
        "inserts/s",
        partial(schedule_session, bench),
    )
    s("schedule_batch", "schedule_batch", "rows/s", partial(schedule_batch, bench))
    s(
        "drain_pgbouncer",
        "drain through PgBouncer",
        "rows/s",
        partial(beside_plain, bench, "drain_pgbouncer", partial(drain_pgbouncer, bench)),
    )
    s(
        "latency_pgbouncer_p50",
        "commit-to-start latency through PgBouncer",
        "ms",
        lambda: latency_pgbouncer(bench)[0],
        "latency_pgbouncer",
    )
    s(
        "drain_processes_2",
        "drain with 2, 4 and 8 processes",
        "rows/s",
        lambda: drain_processes(bench)[0],
        "processes",
    )
    for setting in SOAK_SETTINGS:
        s(
            f"soak_{setting}_rss",
            f"soak, history={setting!r}",
            "KiB",
            partial(soak, bench, setting),
            "soak",
        )
    for handler in ("async", "sync"):
        s(
            f"memory_{handler}",
            f"RSS per running execution, {handler}",
            "bytes",
            partial(memory, bench, handler),
            "memory",
        )
    apply_targets(bench)


def _first(measure: Callable[[Bench, str], list[Figure]], bench: Bench, arg: str) -> Figure:
    """The first of the figures ``measure(bench, arg)`` records (the row the suite shows
    while it runs)."""
    return measure(bench, arg)[0]


def apply_targets(bench: Bench) -> None:
    # A skipped scenario has no figure to compare, nor is a skipped floor one to compare with.
    f = {key: fig for key, fig in bench.figures.items() if "skipped" not in fig.extra}
    for key, floor_key in FLOOR_OF.items():
        if key in f and floor_key in f:
            f[key].floor_key = floor_key
            f[key].floor = f[floor_key].value
    for key, ratio in RATIO_TARGETS[bench.server.name].items():
        if key in f:
            f[key].target = f">= {ratio:.0%} of floor"
            f[key].target_ratio = ratio
            r = f[key].ratio
            f[key].met = None if r is None else r >= ratio
    pooled = f.get("latency_pgbouncer_p50")
    direct = f.get("latency_pgbouncer_direct_p50", f.get("latency_p50"))
    if pooled is not None and direct is not None and direct.value and pooled.value is not None:
        pooled.target = f"<= 1.5x direct p50 ({pooled.value / direct.value:.2f}x)"
        pooled.met = pooled.value <= 1.5 * direct.value
    if "drain_async_2" in f:
        two = f["drain_async_2"]
        one = f.get("drain_async_1")
        two.target = "> 1 process async"
        if one is not None and one.value is not None and two.value is not None:
            two.met = two.value > one.value
            two.target += f" ({two.value / one.value:.2f}x)"
