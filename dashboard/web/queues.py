"""The Queues page: every named queue with its figures, limits and how full they are, who
paused or changed it and when, and pause / resume / limit forms (operators only, POST with the
CSRF token). The changes go through ``store/flow/queues.py``."""

from __future__ import annotations

from typing import Any

from flask import flash, redirect, request, url_for
from werkzeug.wrappers import Response

from ..store.flow import queues
from ..store.reads import capacity
from ..store.reads import queues as read_queues
from .blueprint import bp
from .forms import RetryForm
from .rendering import limited, now, page_or_fragment
from .signin import audit_data, current_actor, operator_required


def queues_context() -> dict[str, Any]:
    """Every queue (at most ``read_queues.QUEUES_SHOWN``, the paused ones chosen first, and
    ``queue_total``, how many there are) and the claims of the last hour, each under the
    dashboard's query time limit (``None``: that read ran past it)."""
    at = now()
    board = limited(lambda: read_queues.queue_board(now=at))
    throughput = limited(lambda: read_queues.claims_last_hour(now=at)) if board is not None else None
    # the queues the live workers serve (their heartbeats: a few rows)
    live = limited(lambda: capacity.capacity(at)) if board is not None else None
    return {
        "queues": None if board is None else board.queues,
        "queue_total": None if board is None else board.total,
        "throughput": throughput,
        "live": live,
        "action_form": RetryForm(),
    }


@bp.get("/queues/")
def queues_page() -> str:
    return page_or_fragment("jobqueue/queues.html", "jobqueue/fragments/queues.html", **queues_context())


def _name(name: str) -> str | None:
    try:
        return queues.check_name(name)
    except ValueError as problem:
        flash(f"Nothing changed: the queue {problem}.", "error")
        return None


def _set_paused(name: str, paused: bool) -> Response:
    if _name(name) is not None:
        change = queues.pause if paused else queues.resume
        if change(name, actor=current_actor().name, event_data=audit_data()):
            flash(f"Queue {name} {'paused' if paused else 'resumed'}.", "success")
        else:
            already = "was already paused" if paused else "was not paused"
            flash(f"Queue {name} {already}: nothing changed.", "info")
    return redirect(url_for("jobqueue_web.queues_page"), 303)


@bp.post("/queues/<path:name>/pause/")
@operator_required
def queue_pause(name: str) -> Response:
    return _set_paused(name, True)


@bp.post("/queues/<path:name>/resume/")
@operator_required
def queue_resume(name: str) -> Response:
    return _set_paused(name, False)


@bp.post("/queues/<path:name>/limits/")
@operator_required
def queue_limits(name: str) -> Response:
    """The limits form: empty fields mean no limit."""
    if _name(name) is None:
        return redirect(url_for("jobqueue_web.queues_page"), 303)
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
        queues.set_limits(
            name,
            concurrency_limit=concurrency,
            rate_limit=rate,
            actor=current_actor().name,
            event_data=audit_data(),
        )
    except ValueError as problem:
        flash(f"Nothing changed: {problem}.", "error")
    else:
        flash(f"Limits of queue {name} saved.", "success")
    return redirect(url_for("jobqueue_web.queues_page"), 303)


def _whole(text: str, field: str) -> int | None:
    text = (text or "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{field} must be a whole number") from None
