"""The operator console through the dashboard: search, bulk actions, single-job actions, workers, why."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store import lifecycle, workers
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.values import utcnow
from tests.support.factories import make_job
from tests.support.forms import HX, csrf_token


def _events(job_id, kind):
    with db.engine.connect() as conn:
        return (
            conn.execute(
                text("SELECT data FROM jobs_jobevent WHERE job_id = :id AND type = :t"),
                {"id": job_id, "t": kind},
            )
            .scalars()
            .all()
        )


def test_short_id_search_opens_the_job(app, client):
    job = make_job("queued")
    make_job("queued")
    response = client.get(f"/jobs/?q={str(job.id)[:8]}")
    assert response.status_code == 303
    assert response.headers["Location"].endswith(f"/jobs/{job.id}/")
    full = client.get(f"/jobs/?q={job.id}")
    assert full.status_code == 303 and full.headers["Location"].endswith(f"/jobs/{job.id}/")


def test_search_by_idempotency_key_error_text_and_payload(app, client):
    keyed = make_job("queued", idempotency_key="order-42")
    assert client.get("/jobs/?q=order-42").headers["Location"].endswith(f"/jobs/{keyed.id}/")
    a = make_job("failed", last_error="TimeoutError: upstream took too long", finished_at=utcnow())
    b = make_job("failed", last_error="TimeoutError: again", finished_at=utcnow())
    make_job("failed", last_error="ValueError: nope", finished_at=utcnow())
    html = client.get("/jobs/?q=timeout&status=failed").get_data(as_text=True)
    assert str(a.id)[:8] in html and str(b.id)[:8] in html
    assert "ValueError" not in html  # and the failed list shows the error column
    assert "<mark>TimeoutError</mark>: again" in html  # the matched part marked
    p = make_job("queued", payload={"user": {"id": 7}, "kind": "x"})
    make_job("queued", payload={"user": {"id": 8}})
    assert client.get("/jobs/?q=user.id=7").headers["Location"].endswith(f"/jobs/{p.id}/")
    assert client.get('/jobs/?q={"kind": "x"}').headers["Location"].endswith(f"/jobs/{p.id}/")
    html = client.get("/jobs/?q=user.id=9").get_data(as_text=True)
    assert "newest 10,000 jobs" in html


def test_a_search_over_any_status_shows_the_matched_error(app, client):
    """A job backing off is found by its error, and the list (any status) gets an error column
    with the matched part marked; a job found by its key alone has an empty cell."""
    error = "HTTPError: 503 from https://api.partner.io/v2/orders/" + "x" * 300
    backing_off = make_job(
        "queued", attempts=1, last_error=error, available_at=utcnow() + timedelta(minutes=1)
    )
    failed = make_job(
        "failed", last_error="ConnectionError: api.partner.io unreachable", finished_at=utcnow()
    )
    keyed = make_job("succeeded", idempotency_key="api.partner.io")
    make_job("failed", last_error="ConnectionError: api.other.io unreachable", finished_at=utcnow())
    html = client.get("/jobs/?q=api.partner.io").get_data(as_text=True)
    for job in (backing_off, failed, keyed):
        assert str(job.id)[:8] in html
    assert "api.other.io" not in html
    assert ">error</th>" in html
    assert "HTTPError: 503 from https://<mark>api.partner.io</mark>/v2/orders/" in html
    assert "ConnectionError: <mark>api.partner.io</mark> unreachable" in html
    plain = client.get("/jobs/").get_data(as_text=True)
    assert ">error</th>" not in plain  # no search: the column is the failed list's alone
    assert ">error</th>" not in client.get(f"/jobs/?q={keyed.idempotency_key}x").get_data(as_text=True)


def test_bad_searches_are_clear_errors_not_500(app, client):
    """A search that cannot be read is a 400 for a browser, saying why at the field (a 200 for
    htmx, which swaps only 2xx answers); odd text that can be read is searched."""
    for q in ["{not json", "{}", "a" * 600]:
        response = client.get("/jobs/", query_string={"q": q})
        assert response.status_code == 400, q
        assert 'id="filter-error-q"' in response.get_data(as_text=True), q
        assert client.get("/jobs/", query_string={"q": q}, headers=HX).status_code == 200
    for q in ["[1]", "..=1", "%00", "\u0001x", "ffff'--", "&|!:*"]:
        assert client.get("/jobs/", query_string={"q": q}).status_code == 200, q
    assert "JSON object" in client.get("/jobs/", query_string={"q": "{oops"}).get_data(as_text=True)


UNSTORABLE_SEARCHES = [
    "a=NaN",
    "a=Infinity",
    "a=-Infinity",
    "a=1e999",
    "a.b=-1e999",
    '{"a": [NaN]}',
    'a="\\ud800"',
]
UNSTORABLE_SEARCHES.append('{"\\udfff": 1}')


@pytest.mark.parametrize("q", UNSTORABLE_SEARCHES)
def test_a_payload_search_no_payload_can_hold_is_a_400_saying_why(app, client, q):
    """jsonb holds no NaN, Infinity, out-of-range number or unpaired surrogate: searching for
    one was a 500 (the database refused the search's own value)."""
    make_job("failed", payload={"a": 1}, last_error="x", finished_at=utcnow())
    listed = client.get("/jobs/", query_string={"q": q})
    assert listed.status_code == 400
    why = "valid Unicode" if "\\u" in q else "finite numbers"
    assert why in listed.get_data(as_text=True)
    dry_run = client.get("/jobs/bulk/retry/", query_string={"q": q})
    assert dry_run.status_code == 400 and why in dry_run.get_data(as_text=True)


def test_next_to_run_lists_ready_jobs_in_claim_order(app, client):
    now = utcnow()
    low = make_job("queued", priority=10, now=now - timedelta(minutes=5))
    high = make_job("queued", priority=90, now=now)
    later = make_job("queued", priority=99, available_at=now + timedelta(hours=1))
    html = client.get("/jobs/?order=next").get_data(as_text=True)
    assert html.index(str(high.id)[:8]) < html.index(str(low.id)[:8])
    assert str(later.id)[:8] not in html


def test_a_bulk_dry_run_counts_at_most_its_cap_and_says_more_than(app, client, monkeypatch):
    from dashboard.web import bulk

    monkeypatch.setattr(bulk, "DRY_RUN_CAP", 2)
    for _ in range(3):
        make_job("failed", type="mail.send", last_error="x", finished_at=utcnow())
    html = client.get("/jobs/bulk/delete/").get_data(as_text=True)
    assert 'data-bulk-count="2+"' in html and "more than" in html
    make_job("failed", type="mail.send", last_error="x", finished_at=utcnow())  # unchanged: 4 > 2
    assert 'data-bulk-count="2+"' in client.get("/jobs/bulk/delete/?type=mail").get_data(as_text=True)
    monkeypatch.setattr(bulk, "DRY_RUN_CAP", 4)
    assert 'data-bulk-count="4"' in client.get("/jobs/bulk/delete/").get_data(as_text=True)


def test_bulk_retry_dry_run_then_confirm(app, client):
    failed = [make_job("failed", type="mail.send", last_error="x", finished_at=utcnow()) for _ in range(3)]
    make_job("failed", type="other", last_error="x", finished_at=utcnow())
    page = client.get("/jobs/bulk/retry/?type=mail")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and 'data-bulk-count="3"' in html
    token = csrf_token(client, "/jobs/bulk/retry/?type=mail")
    done = client.post("/jobs/bulk/retry/", data={"csrf_token": token, "type": "mail", "q": "", "status": ""})
    assert done.status_code == 303
    for job in failed:
        assert read_jobs.get_job(job.id).status == "queued"
        assert _events(job.id, "manual_retry")[0]["actor"] == "anonymous"
    assert "Retried 3 jobs" in client.get(done.headers["Location"]).get_data(as_text=True)


def test_bulk_without_csrf_token_is_refused(app, client):
    make_job("failed", last_error="x", finished_at=utcnow())
    assert client.post("/jobs/bulk/retry/", data={"type": ""}).status_code == 400


def test_bulk_cancel_and_run_now(app, client):
    now = utcnow()
    queued = make_job("queued")
    later = make_job("queued", available_at=now + timedelta(hours=1))
    assert 'data-bulk-count="1"' in client.get("/jobs/bulk/run-now/").get_data(as_text=True)
    token = csrf_token(client)
    done = client.post("/jobs/bulk/run-now/", data={"csrf_token": token}, follow_redirects=True)
    assert "Made 1 job due now." in done.get_data(as_text=True)
    assert read_jobs.get_job(later.id).available_at <= utcnow()
    assert _events(later.id, "rescheduled")
    assert 'data-bulk-count="2"' in client.get("/jobs/bulk/cancel/").get_data(as_text=True)
    done = client.post("/jobs/bulk/cancel/", data={"csrf_token": token}, follow_redirects=True)
    assert "Cancelled 2 jobs." in done.get_data(as_text=True)
    job = read_jobs.get_job(queued.id)
    assert job.status == "failed" and job.last_error == "Cancelled by anonymous"
    assert _events(queued.id, "cancelled")


def test_bulk_wrong_status_is_a_clear_400(app, client):
    response = client.get("/jobs/bulk/retry/?status=queued")
    assert response.status_code == 400
    assert "only touches failed jobs" in response.get_data(as_text=True)
    assert client.get("/jobs/bulk/explode/").status_code == 404


def test_single_job_cancel_and_run_now_buttons(app, client):
    later = make_job("queued", available_at=utcnow() + timedelta(hours=1))
    html = client.get(f"/jobs/{later.id}/").get_data(as_text=True)
    assert 'data-action="cancel"' in html and 'data-action="run-now"' in html
    assert 'data-confirm="Cancel this job?' in html  # static/app.js asks before it posts
    assert html.count('id="csrf_token"') <= 1  # two small forms, and no repeated id
    token = csrf_token(client, f"/jobs/{later.id}/")
    assert client.post(f"/jobs/{later.id}/run-now/", data={"csrf_token": token}).status_code == 303
    assert client.post(f"/jobs/{later.id}/cancel/", data={"csrf_token": token}).status_code == 303
    html = client.get(f"/jobs/{later.id}/", headers=HX).get_data(as_text=True)
    assert "Cancelled by anonymous" in html
    assert "<strong>Before any attempt</strong>" in html and "Attempt 0" not in html
    assert client.post("/jobs/nope/cancel/", data={"csrf_token": token}).status_code == 404


def test_why_not_running_texts(app, client):
    now = utcnow()
    scheduled = make_job("queued", available_at=now + timedelta(hours=2))
    html = client.get(f"/jobs/{scheduled.id}/").get_data(as_text=True)
    assert 'data-why="scheduled"' in html and 'data-why="no_worker"' in html
    backing = make_job(
        "queued", attempts=2, max_attempts=5, available_at=now + timedelta(seconds=40), last_error="boom"
    )
    html = client.get(f"/jobs/{backing.id}/").get_data(as_text=True)
    assert "retry 3 of 5 in" in html and "boom" in html
    me = workers.Identity("h:1:x", "h", 1, now, "one-job", 2, "1", 5.0, ("demo.success",))
    workers.beat(me, jobs_done=0, now=now)
    odd = make_job("queued", type="nobody.runs.this")
    assert "No live worker has a handler for type" in client.get(f"/jobs/{odd.id}/").get_data(as_text=True)
    first = make_job("queued", now=now - timedelta(seconds=10))
    second = make_job("queued", now=now - timedelta(seconds=5))
    elsewhere = make_job("queued", now=now - timedelta(seconds=20), queue="other")  # not ahead: its own queue
    assert "it is next in its queue" in client.get(f"/jobs/{first.id}/").get_data(as_text=True)
    assert "1 job ahead of it in its queue" in client.get(f"/jobs/{second.id}/").get_data(as_text=True)
    assert "it is next in its queue" in client.get(f"/jobs/{elsewhere.id}/").get_data(as_text=True)


def test_failed_job_lists_each_attempts_error_with_traceback_lines(app, client):
    job = enqueue.create_job(enqueue.JobSpec("demo.fail", {}, max_attempts=2)).job
    for attempt in (1, 2):
        claimed = lifecycle.claim_next_job("w:1:thread-1:a", lease_seconds=30)
        trace = (
            f'Traceback (most recent call last):\n  File "x.py", line {attempt}\nValueError: bad {attempt}\n'
        )
        lifecycle.fail_job(
            claimed.id,
            "w:1:thread-1:a",
            attempt,
            f"ValueError: bad {attempt}",
            backoff_base_seconds=0,
            backoff_max_seconds=0,
            event_data={"exception_type": "ValueError", "traceback": trace},
        )
    html = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert html.count("data-attempt=") == 2
    opening = '<pre class="traceback">'  # a tab stop only once it scrolls (app.js)
    assert opening + "Traceback (most recent call last):\n  File &#34;x.py&#34;, line 1\n" in html
    assert "\\n" not in html.split("data-attempt-errors")[1].split("</section>")[0]


def test_workers_page_states(app, client):
    now = utcnow()
    for n, (seen, stopped) in enumerate([(now, None), (now - timedelta(seconds=60), None), (now, now)]):
        me = workers.Identity(f"h:{n}:x", "h", n, now, "one-job", 4, "1", 5.0, ())
        workers.beat(me, jobs_done=n, now=seen)
        if stopped:
            workers.mark_stopped(me, jobs_done=n, now=stopped)
    html = client.get("/workers/").get_data(as_text=True)
    assert 'data-state="alive"' in html and 'data-state="stale"' in html and 'data-state="stopped"' in html
