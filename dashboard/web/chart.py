"""The overview's "finished per minute" chart, laid out in Python and drawn as inline SVG.

Server-rendered so it needs no JavaScript and refreshes with the polled fragment. Each
minute is a stacked bar: succeeded at the bottom, failed on top.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from ..store.reads.overview import MINUTES, MinuteFigures

WIDTH, HEIGHT = 600, 140


@dataclass(frozen=True)
class Bar:
    minute: datetime
    succeeded: int
    failed: int
    x: float
    width: float
    succeeded_y: float
    succeeded_height: float
    failed_y: float
    failed_height: float


@dataclass(frozen=True)
class Chart:
    bars: list[Bar]
    peak: int  # the y axis' top: the busiest minute (at least 1)
    succeeded: int
    failed: int
    start: datetime
    width: int = WIDTH
    height: int = HEIGHT


def build_chart(counts: list[MinuteFigures], start: datetime) -> Chart:
    by_index: dict[int, MinuteFigures] = {}
    for count in counts:
        index = int((count.minute - start).total_seconds() // 60)
        if 0 <= index < MINUTES:
            by_index[index] = count
    peak = max([c.succeeded + c.failed for c in by_index.values()] + [1])
    slot = WIDTH / MINUTES
    bars = []
    for index in range(MINUTES):
        figures = by_index.get(index)
        succeeded, failed = (figures.succeeded, figures.failed) if figures else (0, 0)
        succeeded_height = HEIGHT * succeeded / peak
        failed_height = HEIGHT * failed / peak
        bars.append(
            Bar(
                minute=start + timedelta(minutes=index),
                succeeded=succeeded,
                failed=failed,
                x=round(index * slot + 1, 2),
                width=round(slot - 2, 2),
                succeeded_y=round(HEIGHT - succeeded_height, 2),
                succeeded_height=round(succeeded_height, 2),
                failed_y=round(HEIGHT - succeeded_height - failed_height, 2),
                failed_height=round(failed_height, 2),
            )
        )
    return Chart(
        bars=bars,
        peak=peak,
        succeeded=sum(b.succeeded for b in bars),
        failed=sum(b.failed for b in bars),
        start=start,
    )
