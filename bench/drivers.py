"""The two async MariaDB drivers back to back, through SQLAlchemy's ``AsyncEngine``, on one
durable server in one run: the evidence for the driver the package depends on (asyncmy,
against aiomysql)::

    python bench/drivers.py              # 3 rounds each (a few minutes)
    python bench/drivers.py --quick --rounds 1

Each round measures both drivers, one after the other, the first of the two alternating
from round to round, so that a slow moment of the machine does not land on one alone:

- ``schedule``: ``await Scheduler.schedule(engine, instance)``, one per transaction
  (``single_txns`` of them), interleaved with its raw floor of one PyMySQL INSERT per
  commit (``scheduling.schedule_async``);
- ``drain``: ``drain_rows`` due no-op executions drained by one ``bench/worker.py``
  process on that driver (``scenarios.drain``, as ``drain_async_1``);
- ``connect``: a new connection through the engine (``NullPool``), ``CONNECTS`` times,
  its median.

The table shows each figure's median over the rounds and its range. ``bench/run.py``
does not run this: ``bench/run.py --database mariadb`` measures asyncmy alone.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import anyio
from rich.console import Console
from rich.table import Table
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.pool import NullPool

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.databases import MariaDB  # noqa: E402
from bench.harness import Bench, serving  # noqa: E402
from bench.report import load_average  # noqa: E402
from bench.results import Counts, Figure  # noqa: E402
from bench.scenarios import drain  # noqa: E402
from bench.scheduling import schedule_async  # noqa: E402

DRIVERS = ("asyncmy", "aiomysql")
CONNECTS = 50

#: Each measure: its label, unit, and whether more is better.
MEASURES = {
    "schedule": ("await schedule, one per transaction", "inserts/s", True),
    "schedule_ratio": ("  the same, of its raw floor (b)", "%", True),
    "drain": ("drain by 1 worker process", "rows/s", True),
    "connect": ("new connection (median)", "ms", False),
}


def _connect_ms(bench: Bench, db: str) -> float:
    """The median time of ``CONNECTS`` new connections through an ``AsyncEngine``, after
    one that is not counted (the dialect's first connection reads the server's version)."""

    async def connects() -> list[float]:
        engine = create_async_engine(bench.url(db, use_async=True), poolclass=NullPool)
        times = []
        try:
            async with engine.connect():
                pass
            for _ in range(CONNECTS):
                t0 = time.perf_counter()
                conn = await engine.connect()
                times.append((time.perf_counter() - t0) * 1000.0)
                await conn.close()
        finally:
            await engine.dispose()
        return times

    return statistics.median(anyio.run(connects))


def _round(bench: Bench, server: MariaDB, driver: str, found: dict[str, list[float]]) -> None:
    """One round of ``driver``'s measures, added to ``found`` by measure."""
    server.async_driver = driver
    print(f"[drivers] {driver} ...", file=sys.stderr, flush=True)
    steps: dict[str, Callable[[], Figure | float]] = {
        "schedule": lambda: schedule_async(bench),
        "drain": lambda: drain(bench, f"drain_{driver}", f"drain ({driver})", "async", 1),
        "connect": lambda: _connect_ms(bench, bench.new_db(f"connect_{driver}")),
    }
    for key, step in steps.items():
        try:
            result = step()
        except Exception as exc:
            bench.errors.append(f"{driver} {key}: {type(exc).__name__}: {exc}"[:300])
            continue
        if isinstance(result, Figure):
            if result.value is None:
                continue
            found[key].append(result.value)
            if key == "schedule" and result.ratio is not None:
                found["schedule_ratio"].append(result.ratio * 100.0)
        else:
            found[key].append(result)
        shown = found[key][-1]
        print(f"[drivers]   {key}: {shown:,.2f} {MEASURES[key][1]}", file=sys.stderr, flush=True)


def _render(console: Console, figures: dict[str, dict[str, list[float]]], title: str) -> None:
    table = Table(title=title, title_justify="left")
    table.add_column("Measure")
    table.add_column("Unit")
    for driver in DRIVERS:
        table.add_column(f"{driver} median", justify="right")
        table.add_column(f"{driver} range", justify="right")
    table.add_column(f"{DRIVERS[0]} / {DRIVERS[1]}", justify="right")
    for key, (label, unit, more_is_better) in MEASURES.items():
        cells = [label, unit]
        medians = []
        for driver in DRIVERS:
            values = figures[driver].get(key, [])
            if not values:
                cells += ["-", "-"]
                continue
            medians.append(statistics.median(values))
            cells += [f"{medians[-1]:,.2f}", f"{min(values):,.2f}-{max(values):,.2f}"]
        cells.append(
            f"{medians[0] / medians[1]:.2f}x" + ("" if more_is_better else " (lower is better)")
            if len(medians) == 2 and medians[1]
            else ""
        )
        table.add_row(*cells)
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per driver (default 3)")
    parser.add_argument("--quick", action="store_true", help="smaller counts (smoke test)")
    args = parser.parse_args(argv)
    counts = Counts.quick() if args.quick else Counts()
    console = Console(width=None if sys.stdout.isatty() else 200)
    server = MariaDB()
    load_before = load_average()
    figures: dict[str, dict[str, list[float]]] = {d: defaultdict(list) for d in DRIVERS}
    with serving(server):
        version, durability = server.describe()
        bench = Bench(server, counts, polling_interval=10.0)
        bench.prepare_template()
        for r in range(args.rounds):
            for driver in DRIVERS if r % 2 == 0 else DRIVERS[::-1]:
                _round(bench, server, driver, figures[driver])
    title = (
        f"async MariaDB drivers through AsyncEngine (MariaDB {version}, {durability}, "
        f"{args.rounds} rounds each, alternating; {counts.single_txns:,} schedules, "
        f"{counts.drain_rows:,} rows drained, {CONNECTS} connections per round)"
    )
    _render(console, figures, title)
    console.print(
        f"1-min load average {load_before} before, {load_average()} after", highlight=False
    )
    if bench.errors or bench.problems:
        console.print("[bold]Problems seen[/]")
        for line in bench.errors + bench.problems:
            console.print(f"  - {line}", markup=False, highlight=False)
    return 1 if bench.errors else 0


if __name__ == "__main__":
    sys.exit(main())
