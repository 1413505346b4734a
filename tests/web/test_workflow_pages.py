"""The workflow pages through the Flask client: the recent workflows, one workflow's graph
(live until every job ended, then 286), its summary past the drawing's cap, 404s; cancel and
retry with their dry run, CSRF and roles; the job page's parents, dependents and why; the
waiting counts of the overview, the Queues page, the job list and the JSON."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient

from dashboard.store import lifecycle
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import workflows as read_workflows
from dashboard.store.states import WAITING_AT
from dashboard.web import workflow_graph
from dashboard.web import workflows as web_workflows
from tests.support.forms import HX, csrf_token
from tests.support.secured import build, sign_in


def chain(workflow: str = "etl", *, policy: str | None = None) -> list:
    """fetch -> transform -> load, one workflow, created in one call."""
    specs = [
        JobSpec("etl.fetch", workflow=workflow, max_attempts=1),
        JobSpec("etl.transform", depends_on=(0,), on_parent_failure=policy),
        JobSpec("etl.load", depends_on=(1,)),
    ]
    return [result.job for result in enqueue.create_jobs(specs)]


def settle(job_id: uuid.UUID, *, ok: bool) -> None:
    """Claim ``job_id`` (the only due job) and settle it (a failure is for good: one attempt)."""
    claimed = lifecycle.claim_next_job("w1", lease_seconds=30)
    assert claimed is not None and claimed.id == job_id
    if ok:
        assert lifecycle.complete_job(claimed.id, "w1", claimed.attempts, {"ok": True})
    else:
        failed = lifecycle.fail_job(
            claimed.id, "w1", claimed.attempts, "boom", backoff_base_seconds=1, backoff_max_seconds=1
        )
        assert failed is not None and failed.status == "failed"


def test_the_recent_workflows_with_their_progress_are_in_the_nav(app, client):
    jobs = chain("etl-nightly")
    settle(jobs[0].id, ok=True)
    page = client.get("/workflows/")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and 'href="/workflows/"' in client.get("/").get_data(as_text=True)
    assert 'data-workflow="etl-nightly"' in html and 'href="/workflows/etl-nightly/"' in html
    assert "1 of 3 ended" in html and 'class="wf-fill-succeeded"' in html
    fragment = client.get("/workflows/", headers=HX).get_data(as_text=True)
    assert fragment.startswith('<div id="workflow-list"') or 'id="workflow-list"' in fragment[:200]
    assert "<html" not in fragment


def test_the_graph_is_drawn_with_each_job_linked_and_its_state_in_words(app, client):
    fetch, transform, load = chain()
    page = client.get("/workflows/etl/")
    html = page.get_data(as_text=True)
    assert page.status_code == 200 and '<svg class="wf-graph"' in html
    for job, state in ((fetch, "queued"), (transform, "waiting"), (load, "waiting")):
        assert f'href="/jobs/{job.id}/" data-job="{job.id}" data-state="{state}"' in html
    assert html.count('class="wf-edge') == 2  # fetch -> transform -> load
    assert "○ queued" in html and "◌ waiting" in html  # a glyph and a word, not colour alone
    assert 'hx-trigger="every 3s, poll-now"' in html and 'data-live="true"' in html
    layers = re.findall(r'<td data-label="layer">(\d)</td>', html)
    assert layers == ["1", "2", "3"]


def test_the_poll_stops_with_286_once_every_job_has_ended(app, client):
    fetch, transform, load = chain()
    assert client.get("/workflows/etl/", headers=HX).status_code == 200
    settle(fetch.id, ok=True)
    settle(transform.id, ok=True)
    live = client.get("/workflows/etl/", headers=HX)
    assert live.status_code == 200 and "<html" not in live.get_data(as_text=True)
    settle(load.id, ok=True)
    done = client.get("/workflows/etl/", headers=HX)
    assert done.status_code == 286
    html = done.get_data(as_text=True)
    assert 'data-live="false"' in html and "hx-trigger" not in html and "3 of 3 ended" in html
    assert client.get("/workflows/etl/").status_code == 200  # the page itself is a plain 200


def test_unknown_and_impossible_workflows_are_404(app, client):
    assert client.get("/workflows/nope/").status_code == 404
    assert client.get("/workflows/%00bad/").status_code == 404
    assert client.get("/workflows/" + "x" * 200 + "/").status_code == 404


def test_a_workflow_id_with_a_slash_has_its_page(app, client):
    chain("team/etl")
    assert client.get("/workflows/team/etl/").status_code == 200
    assert 'href="/workflows/team/etl/"' in client.get("/workflows/").get_data(as_text=True)


def test_a_big_workflow_is_summarised_by_layer_type_and_state_not_drawn(app, client, monkeypatch):
    members = 2_000
    specs = [JobSpec("big.member", workflow="big") for _ in range(members)]
    specs += [JobSpec("big.join", depends_on=tuple(range(k, k + 100))) for k in range(0, members, 100)]
    specs.append(JobSpec("big.report", depends_on=tuple(range(members, members + 20))))
    enqueue.create_jobs(specs)
    html = client.get("/workflows/big/").get_data(as_text=True)
    assert "data-summary" in html and '<svg class="wf-graph"' not in html
    assert "a workflow of more than 150 is summarised" in html
    assert re.search(r'data-layer="1">.*?data-count="queued">2,000<', html, re.S)
    assert re.search(r'data-layer="2">.*?data-count="waiting">20<', html, re.S)
    assert re.search(r'data-layer="3">.*?data-count="waiting">1<', html, re.S)
    assert 'data-type="big.member"' in html and 'data-type="big.report"' in html
    monkeypatch.setattr(web_workflows, "DRAW_CAP", 5_000)  # the same workflow, drawn
    drawn = client.get("/workflows/big/").get_data(as_text=True)
    assert drawn.count('class="wf-node') == members + 21


def test_the_summary_reads_at_most_its_cap(app, monkeypatch):
    enqueue.create_jobs([JobSpec("x", workflow="capped") for _ in range(30)])
    monkeypatch.setattr(read_workflows, "MEMBERS_CAP", 10)
    assert len(read_workflows.members("capped", cap=10)) == 10
    summary = workflow_graph.summarise(read_workflows.members("capped", cap=10))
    assert summary.read == 10 and summary.by_layer[0].states == {"queued": 10}


def test_layers_of_a_long_chain_need_no_recursion():
    ids = [uuid.uuid4() for _ in range(5_000)]
    parents = {job: (ids[n - 1],) if n else () for n, job in enumerate(ids)}
    depth = workflow_graph.layers(parents)
    assert depth[ids[0]] == 0 and depth[ids[-1]] == 4_999


def test_cancel_has_a_dry_run_then_the_confirm_cancels_every_queued_and_waiting_job(app, client):
    fetch, transform, load = chain()
    dry = client.get("/workflows/etl/?action=cancel")
    html = dry.get_data(as_text=True)
    assert dry.status_code == 200 and 'data-dry-run-count="3"' in html
    assert 'data-confirm-workflow="cancel"' in html
    assert read_jobs.get_job(fetch.id).status == "queued"  # a dry run changes nothing
    assert client.post("/workflows/etl/", data={"action": "cancel"}).status_code == 400  # no CSRF token
    assert read_jobs.get_job(fetch.id).status == "queued"
    token = csrf_token(client, "/workflows/etl/?action=cancel")
    form = {"action": "cancel", "csrf_token": token}
    done = client.post("/workflows/etl/", data=form, follow_redirects=True)
    assert "Cancelled 3 jobs of the workflow." in done.get_data(as_text=True)
    for job in (fetch, transform, load):
        after = read_jobs.get_job(job.id)
        assert after.status == "failed" and after.cancelled_at is not None
    events = read_jobs.job_events(fetch.id)
    assert events[-1].type == "cancelled" and events[-1].data["workflow"] == "etl"
    assert "actor" in events[-1].data  # who, as the bulk actions record it


def test_retry_has_a_dry_run_then_retries_the_failed_jobs_which_wait_again(app, client):
    fetch, _, load = chain()
    settle(fetch.id, ok=False)  # transform and load are cancelled through it
    assert read_jobs.get_job(load.id).cancelled_at is not None
    html = client.get("/workflows/etl/?action=retry").get_data(as_text=True)
    assert 'data-dry-run-count="3"' in html and 'data-confirm-workflow="retry"' in html
    token = csrf_token(client, "/workflows/etl/")
    form = {"action": "retry", "csrf_token": token}
    done = client.post("/workflows/etl/", data=form, follow_redirects=True)
    assert "Retried 3 failed jobs" in done.get_data(as_text=True)
    assert read_jobs.get_job(fetch.id).available_at < WAITING_AT
    assert read_jobs.get_job(load.id).waiting
    nothing = client.get("/workflows/etl/?action=retry").get_data(as_text=True)
    assert 'data-dry-run-count="0"' in nothing and "data-confirm-workflow" not in nothing


def test_bad_actions_are_refused_and_change_nothing(app, client):
    fetch, _, _ = chain()
    token = csrf_token(client, "/workflows/etl/")
    assert client.get("/workflows/etl/?action=delete").status_code == 400
    assert client.post("/workflows/etl/", data={"action": "delete", "csrf_token": token}).status_code == 400
    assert client.post("/workflows/none/", data={"action": "cancel", "csrf_token": token}).status_code == 404
    assert read_jobs.get_job(fetch.id).status == "queued"


@pytest.fixture
def secured(app: Flask, database_url: str) -> Iterator[Flask]:
    with build(database_url) as built:
        yield built


def test_a_viewer_sees_the_pages_but_no_action_and_may_not_act(app, secured):
    fetch, _, _ = chain()
    viewer: FlaskClient = secured.test_client()
    assert sign_in(viewer, "vera").status_code == 303
    page = viewer.get("/workflows/etl/")
    assert page.status_code == 200 and "data-workflow-actions" not in page.get_data(as_text=True)
    assert viewer.get("/workflows/").status_code == 200
    assert viewer.get("/workflows/etl/?action=cancel").status_code == 403
    token = csrf_token(viewer, "/workflows/etl/")
    assert viewer.post("/workflows/etl/", data={"action": "cancel", "csrf_token": token}).status_code == 403
    assert read_jobs.get_job(fetch.id).status == "queued"
    anonymous = secured.test_client()
    assert anonymous.get("/workflows/etl/").status_code in (302, 303, 401)
    operator = secured.test_client()
    assert sign_in(operator, "olga").status_code == 303
    assert "data-workflow-actions" in operator.get("/workflows/etl/").get_data(as_text=True)


def test_the_job_page_names_the_parents_it_waits_for_and_its_dependents(app, client):
    fetch, transform, load = chain()
    html = client.get(f"/jobs/{transform.id}/").get_data(as_text=True)
    assert 'data-why="parents"' in html and "Waiting for 1 parent job" in html
    assert f'data-parent="{fetch.id}"' in html  # the parent it waits for, in why and in Parents
    assert f'data-dependent="{load.id}"' in html and 'href="/workflows/etl/"' in html
    assert 'data-field="available-waiting"' in html and "9999" not in html
    assert 'data-why="no_worker"' not in html  # not due: the workers are beside the point
    assert "data-run-now" not in html and "/run-now/" not in html  # only its parents release it
    parent = client.get(f"/jobs/{fetch.id}/").get_data(as_text=True)
    assert f'data-dependent="{transform.id}"' in parent and 'data-why="parents"' not in parent


def test_the_job_page_says_which_parent_failure_cancelled_it(app, client):
    fetch, transform, _ = chain()
    settle(fetch.id, ok=False)
    html = client.get(f"/jobs/{transform.id}/").get_data(as_text=True)
    assert 'data-field="cancelled-by-parent"' in html and f'href="/jobs/{fetch.id}/"' in html
    assert "Cancelled because its parent" in html


def test_waiting_is_counted_apart_on_the_overview_the_queues_page_and_the_job_list(app, client):
    chain()
    overview = client.get("/").get_data(as_text=True)
    assert re.search(r'data-stat="waiting">2<', overview)
    assert re.search(r'data-stat="ready">1<', overview) and re.search(r'data-stat="scheduled">0<', overview)
    queues = client.get("/queues/").get_data(as_text=True)
    assert re.search(r'data-field="waiting">2<', queues)
    listed = client.get("/jobs/?status=queued").get_data(as_text=True)
    assert listed.count('class="badge status-waiting"') == 2 and 'data-waiting-count="2"' in listed
    typed = client.get("/jobs/?status=queued&type=load").get_data(as_text=True)
    assert 'data-waiting-count="1"' in typed


def test_the_queue_json_and_the_stats_detail_count_waiting(app, client):
    chain()
    queue = client.get("/api/queues/default/").get_json()
    assert (queue["ready"], queue["scheduled"], queue["waiting"]) == (1, 0, 2)
    listed = client.get("/api/queues/").get_json()["results"]
    assert [q["waiting"] for q in listed] == [2]
    detail = client.get("/api/jobs/stats/detail/").get_json()
    assert detail["waiting"] == {"count": 2, "exact": True}
    assert detail["ready"]["count"] == 1 and detail["scheduled"]["count"] == 0


def _create(client: FlaskClient, **fields: str):
    token = csrf_token(client)
    form = {
        "csrf_token": token,
        "type": "demo.success",
        "payload": "{}",
        "priority": "0",
        "max_attempts": "3",
    }
    return client.post("/jobs/new/", data={**form, **fields})


def test_the_new_job_form_creates_a_job_that_waits_for_its_parents(app, client):
    first, second = (enqueue.create_job(JobSpec("etl.fetch")).job for _ in range(2))
    created = _create(
        client, depends_on=f"{first.id},\n {second.id}\n", on_parent_failure="run", workflow="by-hand"
    )
    assert created.status_code == 303
    job = read_jobs.get_job(uuid.UUID(created.headers["Location"].rstrip("/").rsplit("/", 1)[-1]))
    assert job.depends_on == [first.id, second.id] and job.waiting and job.waiting_on == 2
    assert (job.on_parent_failure, job.workflow) == ("run", "by-hand")
    html = client.get("/jobs/new/").get_data(as_text=True)
    assert 'name="depends_on"' in html and 'name="on_parent_failure"' in html and 'name="workflow"' in html


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"depends_on": "not-an-id"}, "depends_on", "is not a job id"),
        ({"depends_on": str(uuid.UUID(int=7))}, "depends_on", f"No job {uuid.UUID(int=7)}"),
        ({"depends_on": f"{uuid.UUID(int=7)} {uuid.UUID(int=7)}"}, "depends_on", "is named twice"),
        ({"depends_on": ",".join(str(uuid.uuid4()) for _ in range(101))}, "depends_on", "At most 100"),
        ({"on_parent_failure": "run"}, "on_parent_failure", "Only a job with parents"),
        (
            {"on_parent_failure": "explode", "depends_on": str(uuid.uuid4())},
            "on_parent_failure",
            "Choose one",
        ),
        ({"workflow": "x" * 121}, "workflow", "1 to 120 characters"),
        ({"workflow": "bad\u0007bell"}, "workflow", "The workflow id"),
    ],
)
def test_the_workflow_fields_refuse_bad_input_inline_and_create_nothing(app, client, fields, field, words):
    refused = _create(client, **fields)
    html = refused.get_data(as_text=True)
    assert refused.status_code == 400
    assert f'id="{field}" name="{field}"' in html or f'name="{field}"' in html
    error = re.search(rf'id="{field}-error">(.*?)</div>', html, re.S)
    assert error is not None and words in error.group(1), html[:2000]
    assert read_workflows.counts("by-hand").total == 0
    assert client.get("/api/jobs/").get_json()["count"] == 0


WAITING_ROWS_SQL = """
    INSERT INTO jobs_job (id, type, payload, status, priority, available_at, attempts, max_attempts,
                          last_error, created_at, updated_at, depends_on, on_parent_failure,
                          workflow, waiting_on)
    SELECT gen_random_uuid(), 'demo.t' || (g % 7), '{}', 'queued', 0, :waiting, 0, 3, '', :now, :now,
           ARRAY[gen_random_uuid()], 'cancel', 'wf-' || (g % 50), 1
    FROM generate_series(1, 3000) AS g
"""


def test_the_waiting_counts_read_one_point_of_the_queued_indexes(app):
    """Planned on an analysed table (a backlog and waiting jobs, rolled back): the overview's
    waiting count, the list's (with and without a type) and a workflow's members each walk an
    index, never the table."""
    from sqlalchemy import func, select, text

    from dashboard.extensions import db
    from dashboard.store.reads import overview as read_overview
    from dashboard.store.values import utcnow
    from tests.support.factories import seed_analysed_backlog

    now = utcnow()
    with db.engine.connect() as conn, conn.begin() as transaction:
        conn.execute(text(WAITING_ROWS_SQL), {"now": now, "waiting": WAITING_AT})
        seed_analysed_backlog(conn, now)
        conn.execute(text("SET LOCAL enable_seqscan = off"))
        plans = {}
        split = text("EXPLAIN " + str(read_overview.GLOBAL_SPLIT))
        plans["split"] = conn.execute(split, {"now": now, "cap": 11}).scalars().all()
        for name, types in (("list", None), ("list-type", ["demo.t1"])):
            capped = select(text("1")).where(*read_workflows.waiting_filter(types, None)).limit(11)
            query = select(func.count()).select_from(capped.select_from(read_workflows.jobs).subquery())
            compiled = query.compile(dialect=conn.dialect, compile_kwargs={"literal_binds": True})
            plans[name] = conn.exec_driver_sql(f"EXPLAIN {compiled}").scalars().all()
        members = text("EXPLAIN " + str(read_workflows.MEMBERS))
        plans["members"] = conn.execute(members, {"workflow": "wf-1", "cap": 100}).scalars().all()
        transaction.rollback()
    for name, lines in plans.items():
        plan = "\n".join(lines)
        assert "Seq Scan" not in plan, (name, plan)
    assert "9999-12-31" in "\n".join(plans["split"])
    assert "job_queued_idx" in "\n".join(plans["list"]) and "job_queued_type_idx" in "\n".join(
        plans["list-type"]
    )
    assert "job_workflow_idx" in "\n".join(plans["members"])
