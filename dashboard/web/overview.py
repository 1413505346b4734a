"""The overview: is the queue healthy, what is finishing, who is working, what failed.

Its figures are read once each: the live ones (queued split, running, per type) from
``read_overview.queue_detail``, counted up to one cap (:data:`COUNT_CAP`, the same for the
totals and the per-type rows) with the planner's estimate beside a total past it; the finished
totals from ``read_health.finished_totals``; both charts of the hour from one read of its
newest events (``read_overview.hour_figures``). A cancelled job is shown as cancelled, never as
failed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from flask import current_app

from ..config import settings_of
from ..config.rules import TYPE_COUNT_CAP
from ..ops import recount
from ..store import reading
from ..store import workers as read_workers
from ..store.reads import health as read_health
from ..store.reads import overview as read_overview
from ..store.reads import queues as read_queues
from ..store.reads import schedules as read_schedules
from ..store.reads import stats as read_stats
from .blueprint import bp
from .chart import build_chart
from .figure_charts import build_figure_charts
from .forms import RetryForm
from .read_source import from_replica
from .rendering import now, page_or_fragment

log = logging.getLogger(__name__)
T = TypeVar("T")

FAILURES_SHOWN = 8
COUNT_CAP = TYPE_COUNT_CAP  # every count on the overview reads at most this many entries


@dataclass(frozen=True)
class Card:
    label: str  # a status, or "cancelled" / "total"
    value: str  # as shown: "2,178", "about 98,000", "more than 1,000"
    link: dict[str, str]  # the job list's filters for it


def cards(queue: read_overview.QueueDetail | None, totals: read_stats.FinishedTotals | None) -> list[Card]:
    """The counts by status, cancelled apart from failed, and the total."""
    shown: list[Card] = []
    total, about = 0, False
    if queue is not None and queue.queued is not None:
        for label, figure in (("queued", queue.queued), ("running", queue.running)):
            shown.append(Card(label, str(figure), {"status": label}))
            total += figure.estimate if not figure.exact and figure.estimate else figure.value
            about = about or not figure.exact
    if totals is not None:
        finished = (
            ("succeeded", totals.succeeded, {"status": "succeeded"}),
            ("failed", totals.failed, {"status": "failed", "cancelled": "false"}),
            ("cancelled", totals.cancelled, {"status": "failed", "cancelled": "true"}),
        )
        for label, count, link in finished:
            shown.append(Card(label, f"{count:,}", link))
            total += count
    if queue is not None and totals is not None:
        shown.append(Card("total", ("about " if about else "") + f"{total:,}", {}))
    return shown


def overview_context() -> dict[str, Any]:
    """Every panel is read on its own under the dashboard's query time limit: a panel whose
    query runs too long on a huge table shows as unavailable, the others still render."""
    current = now()
    start, _ = read_overview.hour_window(current)
    settings = settings_of(current_app)
    policy = recount.policy_of(settings)
    with reading.time_limit(settings.dashboard_query_timeout_ms):
        totals = _panel(lambda: read_health.finished_totals(current, policy))
        workers = _panel(lambda: read_workers.board(current))
        failures = _panel(lambda: read_stats.latest_failures(FAILURES_SHOWN))
        queue = _panel(
            lambda: read_overview.queue_detail(current, cap=COUNT_CAP, type_cap=COUNT_CAP, estimates=True)
        )
        hour = _panel(lambda: read_overview.hour_figures(current))
        held = _panel(lambda: read_queues.held_back(now=current))
        late_or_failing = _panel(lambda: read_schedules.needing_attention(current))
    figures = hour.minutes if hour is not None else None
    runs = hour.run_times if hour is not None else None
    return {
        "totals": totals,
        "held_back": held or [],
        # the late and failing schedules, each with which it is (a short notice: /schedules/ tells more)
        "schedule_alerts": [(row, row.health(current)) for row in late_or_failing or []],
        "cards": cards(queue, totals),
        "chart": build_chart(figures.items, start) if figures is not None else None,
        "workers": workers,
        "stuck_threads": workers.stuck_threads if workers is not None else None,
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
    except reading.QueryTimeout:
        log.warning("an overview panel timed out", exc_info=True)
        return None


@bp.get("/")
@from_replica
def overview() -> str:
    return page_or_fragment(
        "jobqueue/overview.html", "jobqueue/fragments/overview.html", **overview_context()
    )
