"""The overview's per-minute line charts beside "finished per minute": failure rate and the
claim wait p50 / p95, laid out in Python as inline SVG points (no JavaScript)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..store.reads.overview import MINUTES, MinuteFigures

WIDTH, HEIGHT = 600, 120


@dataclass(frozen=True)
class Line:
    name: str
    points: str  # SVG polyline points, "x,y x,y"


@dataclass(frozen=True)
class LineChart:
    title: str
    unit: str
    peak: float
    lines: list[Line]
    latest: dict[str, float | None]
    width: int = WIDTH
    height: int = HEIGHT


def _line(name: str, values: dict[int, float], peak: float) -> Line:
    slot = WIDTH / (MINUTES - 1)
    points = " ".join(
        f"{round(i * slot, 1)},{round(HEIGHT - HEIGHT * v / peak, 1)}" for i, v in sorted(values.items())
    )
    return Line(name, points)


def _chart(title: str, unit: str, series: dict[str, dict[int, float]], floor: float) -> LineChart:
    peak = max([v for values in series.values() for v in values.values()] + [floor])
    latest = {name: values[max(values)] if values else None for name, values in series.items()}
    return LineChart(title, unit, peak, [_line(n, v, peak) for n, v in series.items()], latest)


def build_figure_charts(figures: list[MinuteFigures], start: datetime) -> dict[str, LineChart]:
    rate: dict[int, float] = {}
    p50: dict[int, float] = {}
    p95: dict[int, float] = {}
    for figure in figures:
        index = int((figure.minute - start).total_seconds() // 60)
        if not 0 <= index < MINUTES:
            continue
        if figure.failure_rate is not None:
            rate[index] = round(100 * figure.failure_rate, 1)
        if figure.wait_p50_ms is not None:
            p50[index] = round(figure.wait_p50_ms / 1000, 2)
        if figure.wait_p95_ms is not None:
            p95[index] = round(figure.wait_p95_ms / 1000, 2)
    return {
        "failure_rate": _chart("Failure rate", "%", {"failed": rate}, 1.0),
        "wait": _chart("Wait before claim", "s", {"p50": p50, "p95": p95}, 0.1),
    }
