"""The admin's charts as shapes (``admin/_charts.py``) and the percentiles they draw
(``_store.stats.percentile``), without a database."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from sqla_scheduler._store.stats import Activity, Percentiles, Point, Tally, percentile
from sqla_scheduler.admin._charts import HEIGHT, TOP, charts, format_ms
from sqla_scheduler.models import STATS_BOUNDS_MS, STATS_BUCKETS, STATS_COLUMNS

START = datetime(2030, 5, 17, 11, 0, tzinfo=timezone.utc)


def hour(counts: dict[int, dict[str, int]], lags: dict[int, float] | None = None) -> Activity:
    points = [
        Point(
            start=START + timedelta(minutes=i),
            counts=counts.get(i, {}),
            lag=Percentiles(p50=(lags or {}).get(i), p95=(lags or {}).get(i)),
            duration=Percentiles(),
        )
        for i in range(60)
    ]
    total: dict[str, int] = {}
    for c in counts.values():
        for outcome, n in c.items():
            total[outcome] = total.get(outcome, 0) + n
    return Activity(
        since=START,
        until=START + timedelta(hours=1),
        step=timedelta(minutes=1),
        task=None,
        points=points,
        counts=total,
    )


def test_bars_stack_outcomes_in_order_scaled_to_a_round_top() -> None:
    drawn = charts(hour({3: {"failed": 2, "succeeded": 8}, 4: {"abandoned": 1}}), "hour")
    bars = drawn.bars.bars
    assert len(bars) == 60
    assert [s.outcome for s in bars[3].segments] == ["succeeded", "failed"]
    succeeded, failed = bars[3].segments
    assert failed.y + failed.height == pytest.approx(succeeded.y)  # stacked
    assert failed.y == pytest.approx(TOP)  # 10 of a top of 10: the whole height
    assert succeeded.height == pytest.approx(4 * failed.height)
    assert bars[3].title == "11:03 UTC (minute): 8 succeeded, 2 failed"
    assert bars[0].segments == []
    assert [t.label for t in drawn.bars.y_ticks] == ["0", "5", "10"]
    assert [t.label for t in drawn.bars.x_ticks] == ["11:00", "11:15", "11:30", "11:45"]
    assert drawn.outcomes == ["succeeded", "failed", "abandoned"]
    assert "8 succeeded, 2 failed, 1 abandoned" in drawn.bars.description
    assert not drawn.empty


def test_lines_break_where_nothing_was_measured() -> None:
    drawn = charts(hour({}, lags={1: 5.0, 2: 50.0, 3: 500.0, 10: 2000.0}), "hour")
    lag = next(line for line in drawn.lines.lines if line.series == "lag-p50")
    assert len(lag.paths) == 1
    assert len(lag.paths[0].split()) == 3
    assert len(lag.dots) == 1  # minute 10 alone
    ys = [float(p.split(",")[1]) for p in lag.paths[0].split()]
    assert ys[0] > ys[1] > ys[2]  # longer is higher, on a log scale: evenly
    assert ys[0] - ys[1] == pytest.approx(ys[1] - ys[2])
    assert [t.label for t in drawn.lines.y_ticks] == ["1 ms", "10 ms", "100 ms", "1 s", "10 s"]
    assert drawn.empty


def test_an_empty_hour_has_no_bars_and_says_so() -> None:
    drawn = charts(hour({}), "hour")
    assert all(not b.segments for b in drawn.bars.bars)
    assert drawn.empty
    assert drawn.rows == []
    assert "none" in drawn.bars.description
    assert all(0 <= t.at <= HEIGHT for t in drawn.bars.y_ticks)


def test_percentiles_interpolate_within_their_bucket() -> None:
    buckets = [0] * STATS_BUCKETS
    buckets[6] = 10  # from 50 to 100 ms
    assert percentile(buckets, 50) == pytest.approx(75)
    assert percentile(buckets, 100) == pytest.approx(100)
    buckets[STATS_BUCKETS - 1] = 90  # beyond the last bound: its lower bound
    assert percentile(buckets, 95) == STATS_BOUNDS_MS[-1]
    assert percentile([0] * STATS_BUCKETS, 50) is None


def test_the_tally_buckets_lag_and_duration() -> None:
    tally = Tally()
    due = START
    tally.count(
        task_name="t",
        outcome="succeeded",
        finished_at=due + timedelta(seconds=3),
        due=due,
        started_at=due + timedelta(milliseconds=1),
    )
    tally.count(task_name="t", outcome="undecodable", finished_at=due, due=due, started_at=None)
    rows = tally.take()
    assert len(tally) == 0
    minute = int(due.timestamp() // 60)
    values = dict(zip(STATS_COLUMNS, rows[(minute, "t", "succeeded")], strict=True))
    assert values["executions"] == 1
    assert values["lag_1"] == 1  # 1 ms: not under 1, under 2
    assert values["duration_11"] == 1  # 2,999 ms: from 2 to 5 s
    assert values["duration_ms"] == 2999
    undecodable = rows[(int(due.timestamp() // 60), "t", "undecodable")]
    assert undecodable[0] == 1
    assert sum(undecodable[1:]) == 0
    tally.put_back(rows)
    tally.put_back(rows)
    assert tally.take()[(int(due.timestamp() // 60), "t", "undecodable")][0] == 2


@pytest.mark.parametrize(
    ("ms", "shown"),
    [(0.5, "0.5 ms"), (1, "1 ms"), (12.3, "12 ms"), (1500, "1.5 s"), (60_000, "1 min")],
)
def test_durations_read_as_people_write_them(ms: float, shown: str) -> None:
    assert format_ms(ms) == shown
