"""The console's operator views through the Flask client: the no-worker banner, stuck threads,
gone workers, a dead owner on the job page, cancelled apart from failed, delete with its audit
log, live lists that hold still, and the retry warning."""

from __future__ import annotations

import re
from datetime import timedelta

from dashboard.store import lifecycle, workers
from dashboard.store.lifecycle import actions
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists as find_jobs
from dashboard.store.values import utcnow
from dashboard.web.rendering import breakable
from tests.support.factories import make_job
from tests.support.forms import HX, csrf_token

ACTOR = {"actor": "olga", "role": "operator"}


def _beat(pid: int, *, seen=None, types=("demo.success",), activity=None, threads=2) -> workers.Identity:
    now = utcnow()
    me = workers.Identity(f"h:{pid}:x", "h", pid, now, "one-job", threads, "1", 5.0, tuple(types))
    workers.beat(me, jobs_done=0, now=seen or now, activity=activity)
    return me


def _stuck_threads(count: int) -> dict:
    past = (utcnow() - timedelta(seconds=40)).isoformat()
    return {
        "threads": [
            {"thread": f"thread-{n}", "job_id": f"{n:08d}-0000-0000-0000-000000000000",
             "type": "demo.timeout", "attempt": 1, "since": past, "lease_until": past}
            for n in range(1, count + 1)
        ],
        "cleanup_interval_seconds": 0.5,
    }  # fmt: skip


def test_the_banner_tops_every_page_while_ready_work_has_no_worker(app, client):
    assert 'data-alarm="' not in client.get("/").get_data(as_text=True)  # nothing ready
    make_job("queued", type="mail.send", available_at=utcnow() + timedelta(hours=1))
    assert 'data-alarm="' not in client.get("/").get_data(as_text=True)  # scheduled is not ready
    make_job("queued", type="mail.send")
    for path in ("/", "/jobs/", "/events/", "/workers/", "/audit/"):
        html = client.get(path).get_data(as_text=True)
        assert 'data-alarm="no_worker"' in html, path
        assert re.search(r"<title>⚠ No live worker · ", html), path
        assert html.index('id="worker-alarm"') < html.index('<header class="site">'), path  # first
    _beat(1, types=("demo.success",))
    fragment = client.get("/alarm/", headers=HX).get_data(as_text=True)
    assert 'data-alarm="no_handler"' in fragment and "mail.send" in fragment
    assert 'data-alarm-title="⚠ No handler · "' in fragment
    _beat(2, types=("mail.send",))
    fragment = client.get("/alarm/", headers=HX).get_data(as_text=True)
    assert "data-alarm=" not in fragment and 'data-alarm-title=""' in fragment


def test_stuck_threads_on_the_overview_the_workers_page_and_why(app, client):
    _beat(3, activity=_stuck_threads(2))
    overview = client.get("/").get_data(as_text=True)
    assert 'data-stuck="2"' in overview and "2 threads stuck in handlers past their lease" in overview
    page = client.get("/workers/").get_data(as_text=True)
    assert 'data-threads-busy="2"' in page and 'data-threads-stuck="2"' in page
    assert page.count("data-past-lease") == 2 and "stuck past its lease" in page
    ready = make_job("queued", type="demo.success")
    why = client.get(f"/jobs/{ready.id}/").get_data(as_text=True)
    assert (
        "2 of 2 threads of the live workers" in why and "2 of them stuck in a handler past its lease" in why
    )


def test_a_gone_worker_row_can_be_removed_by_an_operator(app, client):
    _beat(4, seen=utcnow() - timedelta(hours=1))
    _beat(5, seen=utcnow() - timedelta(seconds=40))  # stale: no remove button
    page = client.get("/workers/").get_data(as_text=True)
    assert 'data-state="gone"' in page and 'data-state="stale"' in page
    assert page.index('data-state="stale"') < page.index('data-state="gone"')
    assert page.count('data-action="remove-worker"') == 1
    token = csrf_token(client, "/workers/")
    refused = client.post("/workers/h:5:x/remove/", data={"csrf_token": token})
    assert refused.status_code == 303 and len(workers.board(utcnow()).workers) == 2
    assert client.post("/workers/h:4:x/remove/", data={}).status_code == 400  # no CSRF token
    removed = client.post("/workers/h:4:x/remove/", data={"csrf_token": token}, follow_redirects=True)
    assert "Worker row removed" in removed.get_data(as_text=True)
    assert [w.pid for w in workers.board(utcnow()).workers] == [5]
    log = client.get("/audit/").get_data(as_text=True)
    assert 'data-audit="worker_removed"' in log and "h:4:x" in log


def test_the_job_page_says_when_the_owner_stopped_and_when_recovery_comes(app, client):
    _beat(6, seen=utcnow() - timedelta(seconds=20))  # killed: silent for 20 s
    _beat(7, activity={"threads": [], "cleanup_interval_seconds": 0.5})
    job = make_job("running", locked_by="h:6:thread-1:ab", locked_until=utcnow() + timedelta(seconds=8))
    html = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert 'data-owner-state="stale"' in html and "stopped sending heartbeats at" in html
    assert "Lease recovery will requeue it at about" in html and 'data-field="recover-at"' in html
    live = client.get(f"/jobs/{job.id}/live/?status=running", headers=HX).get_data(as_text=True)
    assert 'data-owner-state="stale"' in live  # the poll says it too


def test_cancelled_jobs_are_shown_and_filtered_apart_from_failed(app, client):
    queued = make_job("queued", type="mail.send")
    actions.run_one("cancel", queued.id, event_data=ACTOR)
    failure = make_job("failed", type="mail.send", last_error="SMTP 451")
    overview = client.get("/").get_data(as_text=True)
    assert re.search(r'data-status="failed">1<', overview) and re.search(
        r'data-status="cancelled">1<', overview
    )
    listing = client.get("/jobs/?status=failed").get_data(as_text=True)
    assert "status-cancelled" in listing and "status-failed" in listing
    only = client.get("/jobs/?status=failed&cancelled=false").get_data(as_text=True)
    assert str(failure.id) in only and str(queued.id) not in only
    assert "<title>Jobs: failed, not cancelled · Job queue</title>" in only
    assert "<title>Jobs: cancelled · Job queue</title>" in client.get("/jobs/?cancelled=true").get_data(
        as_text=True
    )
    assert 'data-param="cancelled"' in client.get("/jobs/?cancelled=maybe").get_data(as_text=True)


def test_bulk_retry_leaves_cancels_out_and_warns_about_missing_handlers(app, client):
    cancelled = make_job("queued", type="mail.send")
    actions.run_one("cancel", cancelled.id, event_data=ACTOR)
    make_job("failed", type="mail.send")
    no_worker = client.get("/jobs/bulk/retry/?status=failed").get_data(as_text=True)
    assert 'data-bulk-count="1"' in no_worker and 'data-left-out="1"' in no_worker
    assert 'data-retry-warning="no_worker"' in no_worker
    _beat(8, types=("demo.success",))
    warned = client.get("/jobs/bulk/retry/?status=failed&type=mail").get_data(as_text=True)
    assert 'data-retry-warning="no_handler"' in warned and "mail.send" in warned
    both = client.get("/jobs/bulk/retry/?status=failed&include_cancelled=1").get_data(as_text=True)
    assert 'data-bulk-count="2"' in both
    token = csrf_token(client, "/jobs/bulk/retry/")
    done = client.post(
        "/jobs/bulk/retry/", data={"csrf_token": token, "status": "failed"}, follow_redirects=True
    )
    assert "Retried 1 job." in done.get_data(as_text=True)
    assert read_jobs.get_job(cancelled.id).status == "failed"


def test_delete_one_job_after_its_confirmation_page_and_its_404_says_who(app, client):
    job = make_job("succeeded", type="report.build")
    live = make_job("queued")
    assert 'data-action="delete"' in client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert 'data-action="delete"' not in client.get(f"/jobs/{live.id}/").get_data(as_text=True)
    confirm = client.get(f"/jobs/{job.id}/delete/").get_data(as_text=True)
    assert 'data-delete-count="0"' in confirm and "data-confirm-delete" in confirm
    token = csrf_token(client, f"/jobs/{job.id}/delete/")
    kept = client.post(f"/jobs/{live.id}/delete/", data={"csrf_token": token}, follow_redirects=True)
    assert "only finished jobs are deleted" in kept.get_data(as_text=True)
    gone = client.post(f"/jobs/{job.id}/delete/", data={"csrf_token": token}, follow_redirects=True)
    assert "deleted with its events" in gone.get_data(as_text=True)
    missing = client.get(f"/jobs/{job.id}/")
    assert missing.status_code == 404 and "This job was deleted by anonymous" in missing.get_data(
        as_text=True
    )


def test_bulk_delete_dry_run_then_confirm(app, client):
    for _ in range(3):
        make_job("succeeded", type="mail.send")
    make_job("queued", type="mail.send")
    dry = client.get("/jobs/bulk/delete/?type=mail").get_data(as_text=True)
    assert 'data-bulk-count="3"' in dry
    assert client.get("/jobs/bulk/delete/?status=queued").status_code == 400
    token = csrf_token(client, "/jobs/bulk/delete/")
    done = client.post(
        "/jobs/bulk/delete/", data={"csrf_token": token, "type": "mail"}, follow_redirects=True
    )
    assert "Deleted 3 jobs." in done.get_data(as_text=True)
    assert find_jobs.list_jobs(limit=10, offset=0).count == 1
    assert client.get("/audit/").get_data(as_text=True).count('data-audit="job_deleted"') == 3


def test_a_live_first_page_holds_its_rows_and_counts_new_jobs(app, client):
    older = make_job("queued", now=utcnow() - timedelta(minutes=2))
    first = client.get("/jobs/", headers=HX).get_data(as_text=True)
    poll = re.search(r'hx-get="(/jobs/\?top=[^"]+)"', first).group(1).replace("&amp;", "&")
    newer = make_job("queued")
    held = client.get(poll, headers=HX).get_data(as_text=True)
    assert str(older.id) in held and str(newer.id) not in held
    assert 'data-new-jobs="1"' in held and "1 new job: show the newest" in held
    assert f'hx-get="{poll.replace("&", "&amp;")}"' in held  # the next poll holds the same top
    assert str(newer.id) in client.get("/jobs/", headers=HX).get_data(as_text=True)


def test_a_payload_search_is_not_re_run_by_polls(app, client):
    make_job("queued", payload={"user": 42})
    make_job("queued", payload={"user": 42})
    payload = client.get("/jobs/?q=user=42", headers=HX).get_data(as_text=True)
    assert payload.count('href="/jobs/') >= 2 and "data-no-poll" in payload
    assert "hx-trigger" not in payload.split(">")[0]  # the list's element does not poll
    plain = client.get("/jobs/", headers=HX).get_data(as_text=True)
    assert 'hx-trigger="every 3s, poll-now" data-poll' in plain.split(">")[0]


def test_the_feed_shows_each_events_job_type_and_links_its_worker(app, client):
    job = enqueue.create_job(enqueue.JobSpec("mail.send", {})).job
    lifecycle.claim_next_job("hostA:11:thread-1:ab", lease_seconds=30)
    html = client.get("/events/").get_data(as_text=True)
    assert 'data-label="job type"' in html and "mail.<wbr>send" in html
    assert 'href="/workers/#worker-hostA-11"' in html
    assert str(job.id)[:8] in html


def test_names_break_after_dots_and_iso_times_read_as_times(app, client):
    assert str(breakable("email.send")) == "email.<wbr>send"
    assert str(breakable("<b>.x")) == "&lt;b&gt;.<wbr>x"
    job = make_job("failed", last_error="Lease expired at 2026-12-01T10:00:00.000000Z (worker w, attempt 3)")
    html = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert '<time datetime="2026-12-01T10:00:00.000000Z">2026-12-01 10:00:00 UTC (' in html
