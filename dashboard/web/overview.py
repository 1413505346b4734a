"""The overview: is the queue healthy, what is finishing, who is working, what failed."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from flask import current_app

from ..config import settings_of
from ..store import read_overview, read_stats, read_timeout, stats_refresh
from ..store import workers as read_workers
from .blueprint import bp
from .chart import build_chart
from .figure_charts import build_figure_charts
from .forms import RetryForm
from .rendering import now, page_or_fragment

log = logging.getLogger(__name__)
T = TypeVar("T")

FAILURES_SHOWN = 8


def overview_context() -> dict[str, Any]:
    """Every panel is read on its own under the dashboard's query time limit: a panel whose
    query runs too long on a huge table shows as unavailable, the others still render."""
    current = now()
    start, until = read_overview.hour_window(current)
    settings = settings_of(current_app)
    policy = stats_refresh.policy_of(settings)
    with read_timeout.time_limit(settings.dashboard_query_timeout_ms):
        stats = _panel(lambda: read_stats.stats(current, policy))
        minutes = _panel(lambda: read_stats.finished_per_minute(start, until))
        workers = _panel(lambda: read_workers.board(current))  # heartbeats (issue 17)
        failures = _panel(lambda: read_stats.latest_failures(FAILURES_SHOWN))
        queue = _panel(lambda: read_overview.queue_detail(current))
        figures = _panel(lambda: read_overview.minute_figures(start, until))
        runs = _panel(lambda: read_overview.hour_run_times(current))
    return {
        "stats": stats,
        "oldest_queued_seconds": (
            (current - stats.oldest_queued_at).total_seconds() if stats and stats.oldest_queued_at else None
        ),
        "chart": build_chart(minutes, start) if minutes is not None else None,
        "workers": workers,
        "failures": failures,
        "retry_form": RetryForm(),
        "queue": queue,
        "charts": build_figure_charts(figures.items, start) if figures is not None else None,
        "run_times": runs.items if runs is not None else None,
        # the hour held more events than the charts read (limits.CHART_EVENTS_MAX): say so
        "charts_sample": next((s for s in (figures, runs) if s is not None and s.sampled), None),
    }


def _panel(load: Callable[[], T]) -> T | None:
    try:
        return load()
    except read_timeout.QueryTimeout:
        log.warning("an overview panel timed out", exc_info=True)
        return None


@bp.get("/")
def overview() -> str:
    return page_or_fragment("overview.html", "fragments/overview.html", **overview_context())
