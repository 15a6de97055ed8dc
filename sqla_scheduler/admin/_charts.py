"""The overview's charts as shapes: pure functions from an ``Activity`` (the per-minute
counts read back, ``_store.stats``) to the rectangles, lines, ticks and labels that
``templates/_charts.html`` writes out as inline SVG. No I/O and no JavaScript: the page's
Content-Security-Policy allows neither inline scripts nor inline styles, so the shapes
carry classes (coloured in ``admin.css`` through the colour scheme's custom properties)
and presentation attributes only.

Two charts: executions per step stacked by outcome, and the p50 and p95 of start lag
and duration per step on a logarithmic scale of milliseconds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from sqla_scheduler._console import Activity, Point

__all__ = [
    "OUTCOMES",
    "BarChart",
    "Charts",
    "LineChart",
    "Row",
    "charts",
    "format_ms",
]

#: The outcomes in the order the bars stack them, bottom up; any other after them.
OUTCOMES = ("succeeded", "failed", "abandoned", "undecodable")
#: The drawing's size in SVG units (it scales to the page's width) and its plot's margins.
WIDTH, HEIGHT = 720, 200
LEFT, RIGHT, TOP, BOTTOM = 56, 8, 10, 24
#: The log scale's ticks, in milliseconds.
_LOG_TICKS = (1, 10, 100, 1000, 10_000, 60_000, 600_000)


def format_ms(ms: float) -> str:
    """A duration in milliseconds as a person reads it: ``12 ms``, ``1.5 s``, ``2 min``."""
    if ms < 10:
        return f"{ms:.1f} ms".replace(".0 ms", " ms")
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s".replace(".0 s", " s")
    return f"{ms / 60_000:.1f} min".replace(".0 min", " min")


def _clock(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%H:%M")


@dataclass(frozen=True, slots=True, kw_only=True)
class Tick:
    """A gridline's position on its axis, in SVG units, and its label."""

    at: float
    label: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """One outcome's part of a bar."""

    outcome: str
    y: float
    height: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """One step's bar: its segments bottom up, and the numbers it stands for (``title``,
    shown on hover)."""

    x: float
    width: float
    segments: list[Segment]
    title: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Line:
    """One series of the lines chart: ``paths`` (each a polyline's points, broken where a
    step measured nothing) and ``dots`` (steps with no neighbour to join)."""

    series: str
    label: str
    paths: list[str]
    dots: list[tuple[float, float]]


@dataclass(frozen=True, slots=True, kw_only=True)
class BarChart:
    """Executions per step, stacked by outcome."""

    bars: list[Bar]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    outcomes: list[str]
    description: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LineChart:
    """Start lag and duration percentiles per step, on a log scale of milliseconds."""

    lines: list[Line]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    description: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """A step with executions, as the table of numbers under the charts shows it: its
    counts by outcome (in the charts' order), then lag p50 and p95, duration p50 and p95."""

    start: datetime
    counts: list[int]
    percentiles: list[str]


@dataclass(frozen=True, slots=True, kw_only=True)
class Charts:
    """Both charts of one period, and what the page says around them."""

    activity: Activity
    span: str
    bars: BarChart
    lines: LineChart
    outcomes: list[str]
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    right: int = WIDTH - RIGHT
    top: int = TOP
    bottom: int = HEIGHT - BOTTOM

    @property
    def empty(self) -> bool:
        """Whether no execution finished in the period."""
        return self.activity.total == 0

    @property
    def rows(self) -> list[Row]:
        """The steps with executions, for the table of numbers."""
        return [
            Row(
                start=p.start,
                counts=[p.counts.get(o, 0) for o in self.outcomes],
                percentiles=[
                    "—" if v is None else format_ms(v)
                    for v in (p.lag.p50, p.lag.p95, p.duration.p50, p.duration.p95)
                ],
            )
            for p in self.activity.points
            if p.counts
        ]


def _outcomes(activity: Activity) -> list[str]:
    seen = set(activity.counts)
    return [o for o in OUTCOMES if o in seen] + sorted(seen - set(OUTCOMES))


def _nice_ceiling(value: int) -> int:
    """The smallest of 1, 2, 5 times a power of ten at least ``value`` (1 for none)."""
    if value <= 1:
        return 1
    power = 1
    while power * 10 <= value:  # the power of ten of its leading digit
        power *= 10
    return next(m * power for m in (1, 2, 5, 10) if m * power >= value)


def _x_ticks(points: Sequence[Point], every: int) -> list[Tick]:
    width = (WIDTH - RIGHT - LEFT) / max(len(points), 1)
    return [
        Tick(at=LEFT + i * width, label=_clock(p.start))
        for i, p in enumerate(points)
        if i % every == 0
    ]


def _point_title(point: Point, outcomes: Sequence[str], step_label: str) -> str:
    counted = ", ".join(f"{point.counts[o]:,} {o}" for o in outcomes if point.counts.get(o))
    return f"{_clock(point.start)} UTC ({step_label}): {counted or 'no executions'}"


def _bars(activity: Activity, outcomes: Sequence[str], step_label: str) -> BarChart:
    points = activity.points
    top = _nice_ceiling(max((p.total for p in points), default=0))
    plot_height = HEIGHT - BOTTOM - TOP
    width = (WIDTH - RIGHT - LEFT) / max(len(points), 1)
    bars = []
    for i, point in enumerate(points):
        base = float(HEIGHT - BOTTOM)
        segments = []
        for outcome in outcomes:
            n = point.counts.get(outcome, 0)
            if not n:
                continue
            height = plot_height * n / top
            base -= height
            segments.append(Segment(outcome=outcome, y=round(base, 2), height=round(height, 2)))
        bars.append(
            Bar(
                x=round(LEFT + i * width + 0.5, 2),
                width=round(max(width - 1, 0.5), 2),
                segments=segments,
                title=_point_title(point, outcomes, step_label),
            )
        )
    y_ticks = [
        Tick(at=HEIGHT - BOTTOM - plot_height * share, label=f"{round(top * share):,}")
        for share in ((0, 0.5, 1) if top > 1 else (0, 1))
    ]
    counted = ", ".join(f"{activity.counts[o]:,} {o}" for o in outcomes)
    return BarChart(
        bars=bars,
        y_ticks=y_ticks,
        x_ticks=_x_ticks(points, 15 if len(points) == 60 else 16),
        outcomes=list(outcomes),
        description=(
            f"Executions finished per {step_label} from {_clock(activity.since)} to "
            f"{_clock(activity.until)} UTC: {counted or 'none'}."
        ),
    )


def _log_y(ms: float, top_ms: float) -> float:
    plot_height = HEIGHT - BOTTOM - TOP
    share = math.log10(max(ms, 1)) / math.log10(top_ms)
    return round(HEIGHT - BOTTOM - plot_height * min(share, 1.0), 2)


def _series(
    points: Sequence[Point], values: Sequence[float | None], top_ms: float
) -> tuple[list[str], list[tuple[float, float]]]:
    width = (WIDTH - RIGHT - LEFT) / max(len(points), 1)
    paths: list[str] = []
    dots: list[tuple[float, float]] = []
    run: list[tuple[float, float]] = []
    for i, value in enumerate([*values, None]):
        if value is not None:
            run.append((round(LEFT + (i + 0.5) * width, 2), _log_y(value, top_ms)))
            continue
        if len(run) == 1:
            dots.append(run[0])
        elif run:
            paths.append(" ".join(f"{x},{y}" for x, y in run))
        run = []
    return paths, dots


def _lines(activity: Activity) -> LineChart:
    points = activity.points
    series = {
        ("lag-p50", "start lag p50"): [p.lag.p50 for p in points],
        ("lag-p95", "start lag p95"): [p.lag.p95 for p in points],
        ("duration-p50", "duration p50"): [p.duration.p50 for p in points],
        ("duration-p95", "duration p95"): [p.duration.p95 for p in points],
    }
    highest = max((v for vs in series.values() for v in vs if v is not None), default=0.0)
    top_ms = next((t for t in _LOG_TICKS[3:] if t >= highest), _LOG_TICKS[-1])
    lines = []
    for (name, label), values in series.items():
        paths, dots = _series(points, values, top_ms)
        lines.append(Line(series=name, label=label, paths=paths, dots=dots))
    y_ticks = [Tick(at=_log_y(t, top_ms), label=format_ms(t)) for t in _LOG_TICKS if t <= top_ms]
    lag, duration = activity.lag, activity.duration
    described = [
        f"{label} {format_ms(value)}"
        for label, value in (
            ("start lag p50", lag.p50),
            ("p95", lag.p95),
            ("duration p50", duration.p50),
            ("p95", duration.p95),
        )
        if value is not None
    ]
    return LineChart(
        lines=lines,
        y_ticks=y_ticks,
        x_ticks=_x_ticks(points, 15 if len(points) == 60 else 16),
        description=(
            f"Start lag and duration percentiles from {_clock(activity.since)} to "
            f"{_clock(activity.until)} UTC, over the period: "
            f"{', '.join(described) or 'nothing measured'}."
        ),
    )


def charts(activity: Activity, span: str) -> Charts:
    """The charts of ``activity``, the last ``span`` (``hour`` or ``day``)."""
    step_minutes = int(activity.step.total_seconds() // 60)
    step_label = "minute" if step_minutes == 1 else f"{step_minutes} minutes"
    outcomes = _outcomes(activity)
    return Charts(
        activity=activity,
        span=span,
        bars=_bars(activity, outcomes, step_label),
        lines=_lines(activity),
        outcomes=outcomes,
    )
