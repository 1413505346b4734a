"""The overview: is the queue healthy, what is finishing, who is working, what failed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from ..queue import read
from . import bp
from .chart import build_chart, window
from .forms import RetryForm
from .rendering import now, page_or_fragment

WORKERS_WINDOW = timedelta(minutes=5)
FAILURES_SHOWN = 8


def overview_context() -> dict[str, Any]:
    current = now()
    stats = read.stats(current)
    start, until = window(current)
    return {
        "stats": stats,
        "oldest_queued_seconds": (
            (current - stats.oldest_queued_at).total_seconds() if stats.oldest_queued_at else None
        ),
        "chart": build_chart(read.finished_per_minute(start, until), start),
        "workers": read.recent_workers(current - WORKERS_WINDOW),
        "workers_window_minutes": int(WORKERS_WINDOW.total_seconds() // 60),
        "failures": read.latest_failures(FAILURES_SHOWN),
        "retry_form": RetryForm(),
    }


@bp.get("/")
def overview() -> str:
    return page_or_fragment("overview.html", "fragments/overview.html", **overview_context())
