"""The Schedules page: each schedule in words beside its expression, its next runs, its last
runs with their jobs' outcomes, paused, retired, late or failing; pause, resume and run now for
operators (POSTs with the CSRF token, through ``store/flow/schedules.py``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from flask import abort, current_app, flash, redirect, url_for
from werkzeug.wrappers import Response

from ..config import settings_of
from ..runtime.schedules import declared
from ..store.flow import schedules
from ..store.reads import schedules as read_schedules
from .blueprint import bp
from .forms import RetryForm
from .rendering import limited, now, page_or_fragment
from .signin import audit_data, current_actor, operator_required
from .timefmt import duration

RUNS_SHOWN = read_schedules.RUNS_SHOWN


def schedules_context() -> dict[str, Any]:
    """The schedules with their next five slots and newest runs, under the dashboard's query
    time limit (``None`` if the read ran past it); the late and failing ones among them (as of
    this request's ``now``); for the empty page, what this web process declares and the
    modules it imported (``JOB_HANDLER_MODULES``)."""
    at = now()
    rows = limited(lambda: read_schedules.list_schedules(runs=RUNS_SHOWN))
    settings = settings_of(current_app)
    return {
        "schedules": rows,
        "attention": [row for row in rows or [] if row.health(at) is not None],
        "now": at,
        "declared_here": [d.name for d in declared()],
        "handler_modules": settings.worker.handler_modules,
        "action_form": RetryForm(),
        "config_time_zone": settings.time_zone,  # the zone the times are shown in
    }


@bp.app_template_filter("jq_schedule_of")
def schedule_of(key: str | None) -> str | None:
    """The schedule a job's idempotency key names (a run of it), for the job page's link."""
    return schedules.schedule_of_key(key)


@bp.app_template_filter("jq_local_time")
def local_time(moment: datetime, zone: str) -> str:
    """``moment`` on the wall clock of the schedule's zone: ``06:00 Europe/Berlin`` (Mon 2 Dec)."""
    try:
        local = moment.astimezone(ZoneInfo(zone))
    except (ValueError, KeyError, OSError):
        return ""
    return f"{local:%a %d %b %H:%M} {zone}"


@bp.app_template_filter("jq_window")
def window(seconds: float) -> str:
    """A unique window for the page: exact under a minute or when not a whole number of
    minutes below an hour (``45 s``, ``90 s``, ``0.5 s``), else :func:`timefmt.duration`
    (``10 min``, ``1 h 30 min``, ``2 d``)."""
    if seconds < 60 or (seconds < 3600 and seconds % 60):
        return f"{seconds:,g} s"
    return duration(seconds)


@bp.get("/schedules/")
def schedules_page() -> str:
    return page_or_fragment(
        "jobqueue/schedules.html", "jobqueue/fragments/schedules.html", **schedules_context()
    )


def _back(name: str) -> Response:
    return redirect(url_for("jobqueue_web.schedules_page", _anchor=f"schedule-{name}"), 303)


def _set_paused(name: str, paused: bool) -> Response:
    if not schedules.set_paused(name, paused, actor=current_actor().name, event_data=audit_data()):
        abort(404, description="No schedule has that name.")
    done = "paused: no slot is enqueued until it is resumed" if paused else "resumed from its next slot"
    flash(f"Schedule {name} {done}.", "success")
    return _back(name)


@bp.post("/schedules/<name>/pause/")
@operator_required
def schedule_pause(name: str) -> Response:
    return _set_paused(name, True)


@bp.post("/schedules/<name>/resume/")
@operator_required
def schedule_resume(name: str) -> Response:
    """Resume from the next slot after now: the slots that passed while paused are not run."""
    return _set_paused(name, False)


@bp.post("/schedules/<name>/run/")
@operator_required
def schedule_run(name: str) -> Response:
    """Enqueue one run now, outside the slots."""
    try:
        job = schedules.run_now(name, event_data=audit_data())
    except schedules.ScheduleRetired:
        flash(f"Schedule {name} is retired (the code no longer declares it): nothing enqueued.", "warning")
        return _back(name)
    if job is None:
        abort(404, description="No schedule has that name.")
    flash(f"Schedule {name}: a run was enqueued now, job {str(job.id)[:8]}.", "success")
    return _back(name)
