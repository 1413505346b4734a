"""The job page's timeline, folded: lifecycle events one per line, runs of ``progress`` and
``lease_renewed`` events as one line each; and the live poll that sends only what changed
(the header and the events after the last one shown)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flask import render_template, request
from htmx_flask import make_response

from ..limits import BIGINT_MAX
from ..store import read_jobs
from ..store.records import EventRecord
from .blueprint import bp
from .params import _int

NOISE = frozenset({"progress", "lease_renewed"})


@dataclass
class Fold:
    """A run of progress / renewal events between two lifecycle events."""

    progress: int = 0
    renewals: int = 0
    latest_percent: float | None = None
    first_id: int = 0
    last_id: int = 0

    def add(self, event: EventRecord) -> None:
        self.first_id = self.first_id or event.id
        self.last_id = event.id
        if event.type == "progress":
            self.progress += 1
            value = event.data.get("percent") if isinstance(event.data, dict) else None
            if isinstance(value, int | float) and not isinstance(value, bool):
                self.latest_percent = max(0.0, min(100.0, float(value)))
        else:
            self.renewals += 1


@dataclass
class Folded:
    items: list[EventRecord | Fold] = field(default_factory=list)  # lifecycle events and folds
    tail: Fold | None = None  # noise after the last lifecycle event: it still grows
    last_id: int = 0  # the newest lifecycle event shown (the poll asks for what follows)


def fold(events: list[EventRecord], after: int = 0) -> Folded:
    folded = Folded(last_id=after)
    current: Fold | None = None
    for event in events:
        if event.type in NOISE:
            current = current or Fold()
            current.add(event)
            continue
        if current is not None:
            folded.items.append(current)
            current = None
        folded.items.append(event)
        folded.last_id = event.id
    folded.tail = current
    return folded


def timeline_context(events: list[EventRecord]) -> dict[str, Any]:
    folded = fold(events)
    return {"timeline": folded.items, "tail": folded.tail, "last_event_id": folded.last_id}


@bp.get("/jobs/<job_id>/live/")
def job_live(job_id: str) -> Any:
    """The polled part of a live job's page: the header, plus (out of band) the events after
    ``after`` and the folded tail. A status change sends the whole detail instead."""
    from .jobs import _job_id, _timeline_or_404, detail_context  # the page's own helpers

    job_uuid = _job_id(job_id)
    errors: dict[str, str] = {}
    after = _int(request.args, "after", errors, minimum=0, maximum=BIGINT_MAX) or 0
    shown_status = request.args.get("status", "")
    job = read_jobs.get_job(job_uuid)
    if job is None or job.status != shown_status or errors:
        timeline = _timeline_or_404(job_uuid)
        html = render_template("fragments/job_detail.html", **detail_context(timeline))
        return make_response(html, 200, retarget="#job-detail", reswap="outerHTML")
    newer = read_jobs.job_events(job_uuid, after_id=after)
    folded = fold(newer, after)
    progress = None
    for event in reversed(newer):
        if event.type == "progress" and event.attempt == job.attempts:
            progress = event
            break
    context = detail_context(read_jobs.JobTimeline(job=job, events=[], progress=progress))
    context.update(new_items=folded.items, tail=folded.tail, last_event_id=folded.last_id)
    return render_template("jobs/live.html", **context)
