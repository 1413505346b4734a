"""``GET /metrics``: the per-queue gauges, their label capped by METRICS_QUEUE_LABELS."""

from __future__ import annotations

import dataclasses

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.ops.web_metrics import capped_types
from dashboard.state import state_of
from dashboard.store.flow import queues
from dashboard.store.lifecycle import utcnow
from dashboard.store.reads import metrics as read_metrics
from tests.ops.helpers import parse, scrape_app, value
from tests.support.factories import make_job, seed_analysed_backlog


def test_per_queue_gauges_count_known_rows(app):
    make_job("queued", queue="mail")
    make_job("queued", queue="mail")
    make_job("running", queue="reports")
    make_job("queued")
    queues.pause("reports")
    samples = parse(scrape_app(app).get_data(as_text=True))
    assert value(samples, "jobqueue_queue_jobs_ready", queue="mail") == 2
    assert value(samples, "jobqueue_queue_jobs_ready", queue="default") == 1
    assert value(samples, "jobqueue_queue_jobs_running", queue="reports") == 1
    assert value(samples, "jobqueue_queue_paused", queue="reports") == 1
    assert value(samples, "jobqueue_queue_paused", queue="mail") == 0


def test_the_queue_label_is_capped_the_rest_summed_under_other(app, monkeypatch):
    for n in range(5):
        for _ in range(n + 1):
            make_job("queued", queue=f"q{n}")
    settings = state_of(app).settings
    ops = dataclasses.replace(settings.ops, metrics_queue_labels=2)
    monkeypatch.setattr(state_of(app), "settings", dataclasses.replace(settings, ops=ops))
    samples = parse(scrape_app(app).get_data(as_text=True))
    ready = {
        dict(labels)["queue"]: v
        for (name, labels), v in samples.items()
        if name == "jobqueue_queue_jobs_ready"
    }
    assert ready == {"q4": 5, "q3": 4, "other": 6}
    assert capped_types({"a": {"ready": 1}}, 0) == {"other": {"ready": 1}}


@pytest.mark.parametrize("statement", [read_metrics.RUNNING_BY_QUEUE_SQL])
def test_the_running_per_queue_walk_is_bounded(app, statement):
    now = utcnow()
    with app.app_context(), db.engine.connect() as conn, conn.begin() as transaction:
        seed_analysed_backlog(conn, now)
        plan = "\n".join(r[0] for r in conn.execute(text("EXPLAIN " + statement.text), {"cap": 100}))
        transaction.rollback()
    assert "Limit" in plan and "job_timeout_idx" in plan, plan
