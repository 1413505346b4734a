"""The Queues page: figures, pause and resume (CSRF), limits, who and when; the reasons a job
waits on its queue, on the job page and the overview."""

from __future__ import annotations

from dashboard.store import lifecycle, workers
from dashboard.store.flow import queues
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import queues as read_queues
from dashboard.store.values import utcnow
from tests.support.forms import csrf_token


def test_the_page_lists_each_queue_with_its_figures_and_is_linked_from_the_header(app, client):
    enqueue.create_job(enqueue.JobSpec("demo.success", queue="mail"))
    page = client.get("/queues/").get_data(as_text=True)
    assert 'data-queue="mail"' in page and 'data-paused="false"' in page
    assert 'href="/queues/"' in client.get("/").get_data(as_text=True)


def test_an_operator_pauses_and_resumes_with_the_csrf_token_and_it_is_shown(app, client):
    enqueue.create_job(enqueue.JobSpec("demo.success", queue="mail"))
    assert client.post("/queues/mail/pause/", data={}).status_code == 400  # no CSRF token
    assert not read_queues.get_queue("mail").paused
    token = csrf_token(client, "/queues/")
    paused = client.post("/queues/mail/pause/", data={"csrf_token": token}, follow_redirects=True)
    html = paused.get_data(as_text=True)
    assert "Queue mail paused." in html and 'data-paused="true"' in html and "paused by" in html
    assert read_queues.get_queue("mail").paused
    log = client.get("/audit/").get_data(as_text=True)
    assert 'data-audit="queue_paused"' in log
    resumed = client.post("/queues/mail/resume/", data={"csrf_token": token}, follow_redirects=True)
    assert 'data-paused="false"' in resumed.get_data(as_text=True)


def test_the_limits_form_sets_and_clears_and_refuses_bad_values(app, client):
    enqueue.create_job(enqueue.JobSpec("demo.success", queue="mail"))
    token = csrf_token(client, "/queues/")
    form = {"csrf_token": token, "concurrency_limit": "2", "rate_count": "5", "rate_period_seconds": "60"}
    saved = client.post("/queues/mail/limits/", data=form, follow_redirects=True).get_data(as_text=True)
    assert "Limits of queue mail saved." in saved and "0 of 2 running" in saved and "claims per" in saved
    bad = client.post("/queues/mail/limits/", data={**form, "concurrency_limit": "0"}, follow_redirects=True)
    assert "Nothing changed: concurrency_limit" in bad.get_data(as_text=True)
    assert read_queues.get_queue("mail").concurrency_limit == 2
    cleared = {"csrf_token": token, "concurrency_limit": "", "rate_count": "", "rate_period_seconds": ""}
    client.post("/queues/mail/limits/", data=cleared)
    info = read_queues.get_queue("mail")
    assert info.concurrency_limit is None and info.rate_limit is None


def test_the_job_page_and_the_overview_say_a_paused_queue_holds_the_job_back(app, client):
    job = enqueue.create_job(enqueue.JobSpec("demo.success", queue="mail")).job
    queues.pause("mail", actor="olga")
    html = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert 'data-why="paused"' in html and "is paused" in html and "olga" in html
    overview = client.get("/").get_data(as_text=True)
    assert "data-held-back" in overview and 'data-queue="mail"' in overview
    queues.resume("mail")
    assert 'data-why="paused"' not in client.get(f"/jobs/{job.id}/").get_data(as_text=True)


def test_the_job_page_says_the_queue_is_full(app, client):
    queues.set_limits("mail", concurrency_limit=1)
    enqueue.create_job(enqueue.JobSpec("demo.success", queue="mail"))
    waiting = enqueue.create_job(enqueue.JobSpec("demo.success", queue="mail")).job
    assert len(lifecycle.claim_jobs("w", lease_seconds=30, limit=2, queues=["mail"])) == 1
    html = client.get(f"/jobs/{waiting.id}/").get_data(as_text=True)
    assert 'data-why="queue_full"' in html and "1 of at most 1 attempts are running" in html
    assert 'data-why="no_worker"' not in html and "Waiting for a free worker" not in html  # the only reason


def test_the_rate_limited_reason(app, client):
    queues.set_limits("r", rate_limit={"count": 1, "period_seconds": 3600})
    enqueue.create_job(enqueue.JobSpec("demo.success", queue="r"))
    waiting = enqueue.create_job(enqueue.JobSpec("demo.success", queue="r")).job
    assert len(lifecycle.claim_jobs("w", lease_seconds=30, limit=2, queues=["r"])) == 1
    html = client.get(f"/jobs/{waiting.id}/").get_data(as_text=True)
    assert 'data-why="rate_limited"' in html and "the next may start at" in html
    assert 'data-why="no_worker"' not in html and "Waiting for a free worker" not in html  # the only reason


def test_a_queue_no_live_worker_serves_is_named_by_the_queues_page_the_banner_and_the_job_page(app, client):
    now = utcnow()
    mail_only = workers.Identity("h:1:x", "h", 1, now, "one-job", 2, "1", 5.0, ("demo.success",), ("mail",))
    workers.beat(mail_only, jobs_done=0, now=now)
    job = enqueue.create_job(enqueue.JobSpec("demo.success")).job  # in default
    enqueue.create_job(enqueue.JobSpec("demo.success", queue="mail"))
    page = client.get("/queues/").get_data(as_text=True)
    default_row = page.split('id="queue-default"')[1].split("</tr>")[0]
    mail_row = page.split('id="queue-mail"')[1].split("</tr>")[0]
    assert 'data-field="unserved"' in default_row and "no live worker serves this queue" in default_row
    assert 'data-field="unserved"' not in mail_row and '<span data-field="served">mail</span>' in page
    overview = client.get("/").get_data(as_text=True)
    assert 'data-alarm="no_queue_worker"' in overview and "<title>⚠ Queue not served · " in overview
    banner = overview.split('data-alarm="no_queue_worker"')[1].split("</p>")[0]
    assert "No live worker serves queue" in banner and 'data-queue="default"' in banner
    html = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert 'data-why="no_queue_worker"' in html and "No live worker serves this queue" in html
    assert "Waiting for a free worker" not in html
    queues.pause("default", actor="olga")  # held on purpose: no banner, and the pause is the reason
    assert 'data-alarm="' not in client.get("/").get_data(as_text=True)
    html = client.get(f"/jobs/{job.id}/").get_data(as_text=True)
    assert 'data-why="paused"' in html and 'data-why="no_queue_worker"' not in html


def test_a_viewer_reads_the_page_but_cannot_pause(app, database_url):
    from tests.support.secured import build, form_token, sign_in

    enqueue.create_job(enqueue.JobSpec("demo.success", queue="mail"))
    with build(database_url) as secured:
        anonymous = secured.test_client()
        assert anonymous.get("/queues/").status_code in (302, 303)  # to the sign-in page
        viewer = secured.test_client()
        assert sign_in(viewer, "vera").status_code == 303
        page = viewer.get("/queues/").get_data(as_text=True)
        assert 'data-queue="mail"' in page and 'data-action="pause"' not in page
        token = form_token(viewer, "/queues/")
        refused = viewer.post("/queues/mail/pause/", data={"csrf_token": token})
        assert refused.status_code == 403
        assert not read_queues.get_queue("mail").paused
