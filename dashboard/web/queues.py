"""The Queues page: every named queue with its figures, limits and how full they are, who
paused or changed it and when, and pause / resume / limit forms (operators only, POST with the
CSRF token). The changes go through ``store/queues.py``."""

from __future__ import annotations

from typing import Any

from flask import current_app, flash, redirect, request, url_for
from werkzeug.wrappers import Response

from ..config import settings_of
from ..store import queues, read_queues, read_timeout
from .blueprint import bp
from .forms import RetryForm
from .rendering import now, page_or_fragment
from .signin import audit_data, operator_required


def queue_board() -> list[read_queues.QueueInfo] | None:
    """Every queue under the dashboard's query time limit; None if it ran past it."""
    try:
        with read_timeout.time_limit(settings_of(current_app).dashboard_query_timeout_ms):
            return read_queues.list_queues(now=now())
    except read_timeout.QueryTimeout:
        return None


def queues_context() -> dict[str, Any]:
    board = queue_board()
    throughput = read_queues.claims_last_hour(now=now()) if board is not None else None
    return {"queues": board, "throughput": throughput, "action_form": RetryForm()}


@bp.get("/queues/")
def queues_page() -> str:
    return page_or_fragment("queues.html", "fragments/queues.html", **queues_context())


def _name(name: str) -> str | None:
    try:
        return queues.check_name(name)
    except ValueError as problem:
        flash(f"Nothing changed: the queue {problem}.", "error")
        return None


@bp.post("/queues/<path:name>/pause/")
@operator_required
def queue_pause(name: str) -> Response:
    if _name(name) is not None:
        data = audit_data()
        changed = queues.pause(name, actor=str(data.get("actor") or ""), event_data=data)
        flash(f"Queue {name} paused." if changed else f"Queue {name} was already paused.", "success")
    return redirect(url_for("web.queues_page"), 303)


@bp.post("/queues/<path:name>/resume/")
@operator_required
def queue_resume(name: str) -> Response:
    if _name(name) is not None:
        data = audit_data()
        changed = queues.resume(name, actor=str(data.get("actor") or ""), event_data=data)
        flash(f"Queue {name} resumed." if changed else f"Queue {name} was not paused.", "success")
    return redirect(url_for("web.queues_page"), 303)


@bp.post("/queues/<path:name>/limits/")
@operator_required
def queue_limits(name: str) -> Response:
    """The limits form: empty fields mean no limit."""
    if _name(name) is None:
        return redirect(url_for("web.queues_page"), 303)
    form = request.form
    try:
        concurrency = _whole(form.get("concurrency_limit", ""), "concurrency_limit")
        count = _whole(form.get("rate_count", ""), "rate_limit.count")
        period_text = (form.get("rate_period_seconds") or "").strip()
        if (count is None) != (not period_text):
            raise ValueError("rate_limit needs both a count and a period, or neither")
        rate = None
        if count is not None:
            try:
                period = float(period_text)
            except ValueError:
                raise ValueError("rate_limit.period_seconds must be a number of seconds") from None
            rate = queues.check_rate_limit({"count": count, "period_seconds": period})
        data = audit_data()
        queues.set_limits(
            name,
            concurrency_limit=concurrency,
            rate_limit=rate,
            actor=str(data.get("actor") or ""),
            event_data=data,
        )
    except ValueError as problem:
        flash(f"Nothing changed: {problem}.", "error")
    else:
        flash(f"Limits of queue {name} saved.", "success")
    return redirect(url_for("web.queues_page"), 303)


def _whole(text: str, field: str) -> int | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{field} must be a whole number") from None
