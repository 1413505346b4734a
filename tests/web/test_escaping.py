"""Markup that reaches the database is shown as text on every page that displays it.

The rows are written the ways hostile text really arrives: a client's job type, payload and
idempotency key, a handler's progress message and data, its error (``last_error`` and the
``failed`` event), its result, and a worker id. Every page and fragment that shows them is
fetched; none may contain the markup unescaped, and each shows it escaped, as text.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from markupsafe import escape

from dashboard.store import lifecycle, values, workers
from dashboard.store.lifecycle import create as enqueue
from tests.support.factories import make_job

SCRIPT = "<script>alert('xss')</script>"
BREAKOUT = "</pre></td>\"'><img src=x onerror=alert(1)>"
HOSTILE = SCRIPT + BREAKOUT
RAW = (SCRIPT, "<img src=x onerror", "</pre></td>")
WORKER = f"{SCRIPT}:1:thread-1:{BREAKOUT}"
HX = {"HX-Request": "true"}


@pytest.fixture
def hostile_jobs(app) -> dict[str, uuid.UUID]:
    """A failed job and a succeeded job carrying markup in every user-controlled field."""
    created = enqueue.create_job(
        enqueue.JobSpec(SCRIPT, {SCRIPT: [HOSTILE, {"k": BREAKOUT}]}, idempotency_key=HOSTILE)
    ).job
    running = make_job(
        "running",
        type=SCRIPT,
        payload={"note": HOSTILE},
        max_attempts=1,
        locked_by=WORKER,
        idempotency_key=SCRIPT,
    )
    lifecycle.record_progress(
        running.id, WORKER, 1, message=HOSTILE, data={SCRIPT: BREAKOUT, "percent": SCRIPT}
    )
    lifecycle.fail_job(
        running.id,
        WORKER,
        1,
        HOSTILE,
        backoff_base_seconds=1,
        backoff_max_seconds=1,
        event_data={"traceback": HOSTILE},
    )
    finished = make_job("running", type=SCRIPT, locked_by=WORKER)
    lifecycle.complete_job(finished.id, WORKER, 1, {"html": HOSTILE}, event_data={SCRIPT: HOSTILE})
    holder = make_job("running", type=SCRIPT, locked_by=WORKER)
    lifecycle.record_progress(holder.id, WORKER, 1, message=HOSTILE, data={"percent": 50})
    return {"queued": created.id, "failed": running.id, "succeeded": finished.id, "running": holder.id}


def _pages(jobs: dict[str, uuid.UUID]) -> list[str]:
    detail = [f"/jobs/{job_id}/" for job_id in jobs.values()]
    feeds = [f"/events/?job_id={job_id}" for job_id in jobs.values()]
    return ["/", "/jobs/", "/jobs/?status=failed", f"/jobs/?type={SCRIPT}", "/events/", *detail, *feeds]


def _assert_text_only(client: Any, path: str, headers: dict[str, str]) -> str:
    response = client.get(path, headers=headers)
    html = response.get_data(as_text=True)
    assert response.status_code == 200, (path, html[-1000:])
    for raw in RAW:
        assert raw not in html, (path, headers, raw)
    assert str(escape(SCRIPT)) in html, (path, headers)  # shown, as text
    return html


@pytest.mark.parametrize("headers", [{}, HX], ids=["page", "fragment"])
def test_markup_from_every_field_is_shown_as_text_on_every_page(client, hostile_jobs, headers):
    for path in _pages(hostile_jobs):
        _assert_text_only(client, path, headers)


def test_each_hostile_field_is_visible_escaped_where_it_belongs(client, hostile_jobs):
    overview = _assert_text_only(client, "/", {})
    assert str(escape(HOSTILE)) in overview  # latest failures: the last error
    now = values.utcnow()  # a worker process whose host name is markup (its heartbeat row)
    workers.beat(
        workers.Identity("h:1:x", HOSTILE, 1, now, "one-job", 1, SCRIPT, 5.0, ()), jobs_done=0, now=now
    )
    assert str(escape(HOSTILE)) in _assert_text_only(client, "/workers/", {})  # the host
    failed = _assert_text_only(client, f"/jobs/{hostile_jobs['failed']}/", {})
    last_error = f'<pre class="error-text">{escape(HOSTILE)}</pre>'
    assert last_error in failed
    assert f'<p class="event-message">{escape(HOSTILE)}</p>' in failed  # progress and failed messages
    queued = _assert_text_only(client, f"/jobs/{hostile_jobs['queued']}/", {})
    assert f'<dd class="mono wrap">{escape(HOSTILE)}</dd>' in queued  # idempotency key
    running = _assert_text_only(client, f"/jobs/{hostile_jobs['running']}/", {})
    assert f'<span class="mono wrap" data-field="owner">{escape(WORKER)}</span>' in running
    feed = _assert_text_only(client, "/events/", {})
    assert f"<div>{escape(HOSTILE)}</div>" in feed  # event messages
    listing = _assert_text_only(client, f"/jobs/?type={SCRIPT}", {})
    assert f"type contains “{escape(SCRIPT)}”" in listing
