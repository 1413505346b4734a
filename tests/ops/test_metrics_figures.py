"""``GET /metrics`` publishes only figures it computed, with a bounded number of ``type`` series,
and the documented alert rules (docs/operations.md) cover a ``/metrics`` that stops answering."""

from __future__ import annotations

import dataclasses
import re
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from sqlalchemy import text

from dashboard.config import settings_of
from dashboard.extensions import db
from dashboard.ops import recount
from dashboard.state import state_of
from dashboard.store.reads import metrics as read_metrics
from dashboard.store.reads import stats_refresh
from dashboard.store.reads.stats import StatsPolicy
from dashboard.store.values import utcnow
from tests.support.factories import make_job

from .helpers import parse, scrape_app, value

OPERATIONS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


@pytest.fixture
def settings(app, monkeypatch):
    """``settings(**changes)``: the app as if started with those settings, for this test only."""

    def change(**changes):
        current = state_of(app).settings
        ops = {k: v for k, v in changes.items() if hasattr(current.ops, k)}
        top = {k: v for k, v in changes.items() if k not in ops}
        changed = dataclasses.replace(current, ops=dataclasses.replace(current.ops, **ops), **top)
        monkeypatch.setattr(state_of(app), "settings", changed)

    return change


def test_the_first_scrape_after_an_idle_spell_counts_the_finished_jobs(app):
    """The cached totals were counted while nothing had finished (as at installation, or before
    an idle spell); jobs finished since. The scrape must say how many, not the old zeros."""
    with app.app_context():
        stats_refresh.refresh_finished_counts()  # counted: 0 and 0
    for _ in range(3):
        make_job("succeeded")
    make_job("failed")
    samples = parse(scrape_app(app).get_data(as_text=True))
    assert value(samples, "jobqueue_jobs", status="succeeded") == 3
    assert value(samples, "jobqueue_jobs", status="failed") == 1


def test_on_a_large_table_cached_totals_too_old_are_left_out_and_recounted(app):
    """Above the exact-count size the cached totals are published while fresh enough; past
    twice STATS_REFRESH_SECONDS they are left out of the scrape (never the stale figure) and a
    recount starts. The clock is moved with ``now``."""
    make_job("succeeded")
    with app.app_context():
        stats_refresh.refresh_finished_counts()
        with db.engine.connect() as conn:
            counted_at = conn.execute(text("SELECT counted_at FROM jobs_finished_counts")).scalar_one()
            recounts: list[int] = []
            large = StatsPolicy(exact_below_rows=0, refresh_seconds=30, on_stale=lambda: recounts.append(1))

            fresh = read_metrics.finished_totals(conn, counted_at + timedelta(seconds=10), large)
            assert fresh == ({"succeeded": 1, "failed": 0, "cancelled": 0}, counted_at) and recounts == []
            aging = read_metrics.finished_totals(conn, counted_at + timedelta(seconds=45), large)
            assert aging == ({"succeeded": 1, "failed": 0, "cancelled": 0}, counted_at) and recounts == [1]
            stale = read_metrics.finished_totals(conn, counted_at + timedelta(seconds=61), large)
            assert stale == ({}, counted_at) and recounts == [1, 1]


def test_a_scrape_leaves_out_totals_it_did_not_compute(app, settings):
    make_job("succeeded")
    settings(stats_exact_below_rows=0)  # a large table, as far as the policy goes
    with app.app_context():
        stats_refresh.refresh_finished_counts()
        with db.engine.connect() as conn:
            counted_at = conn.execute(text("SELECT counted_at FROM jobs_finished_counts")).scalar_one()
        policy = recount.policy_of(settings_of(app))
        snap = read_metrics.read_snapshot(policy, now=counted_at + timedelta(days=1))  # a day later
    assert snap.finished == {}
    assert snap.finished_counted_at == counted_at  # the age gauge still says how old they are


def test_the_type_label_keeps_the_busiest_types_and_sums_the_rest_as_other(app, settings):
    now = utcnow()
    for job_type, count in {"mail.send": 4, "report.build": 3, "a.rare": 1, "b.rare": 1, "other": 1}.items():
        for _ in range(count):
            make_job("queued", type=job_type, available_at=now - timedelta(seconds=5))
    make_job("running", type="c.rare")
    settings(metrics_type_labels=2)
    samples = parse(scrape_app(app).get_data(as_text=True))
    ready = {
        dict(labels)["type"]: v for (name, labels), v in samples.items() if name == "jobqueue_jobs_ready"
    }
    assert ready == {"mail.send": 4, "report.build": 3, "other": 3}  # a.rare, b.rare and "other"
    assert value(samples, "jobqueue_jobs_running", type="other") == 1  # c.rare
    assert value(samples, "jobqueue_oldest_ready_age_seconds", type="other") >= 5
    assert value(samples, "jobqueue_jobs", status="queued") == 10  # the totals are unchanged
    types = {dict(labels).get("type") for (name, labels) in samples if name.startswith("jobqueue_jobs_")}
    assert types == {"mail.send", "report.build", "other"}


def test_with_no_labels_of_their_own_every_type_is_other(app, settings):
    make_job("queued", type="mail.send")
    settings(metrics_type_labels=0)
    samples = parse(scrape_app(app).get_data(as_text=True))
    assert value(samples, "jobqueue_jobs_ready", type="other") == 1
    assert value(samples, "jobqueue_jobs_ready", type="mail.send") is None


def test_the_alert_rules_include_a_metrics_endpoint_that_stops_answering():
    """A database outage makes /metrics answer 503: Prometheus records ``up == 0`` and no
    other rule fires, since every jobqueue_* series is gone."""
    blocks = re.findall(r"```yaml\n(.*?)```", OPERATIONS_PAGE.read_text(), flags=re.S)
    rules = [
        rule
        for block in blocks
        for group in (yaml.safe_load(block) or {}).get("groups", [])
        for rule in group.get("rules", [])
    ]
    down = [rule for rule in rules if re.search(r'\bup\{job="jobqueue-web"\}\s*==\s*0', rule.get("expr", ""))]
    assert down, [rule.get("alert") for rule in rules]
    assert down[0].get("for") and down[0]["annotations"]["summary"]


def test_a_workers_counters_label_only_the_types_it_handles(app):
    """A worker runs whatever type is queued; one it has no handler for (it can only fail it)
    is counted under ``type="other"``, so clients cannot add series to a worker either."""
    from dashboard.ops import worker_metrics
    from dashboard.store.lifecycle import create as enqueue
    from tests.support.worker_loop import SETTINGS, one_job_loop

    def sample(name: str, job_type: str) -> float:
        return worker_metrics.REGISTRY.get_sample_value(name, {"type": job_type}) or 0.0

    started_other = sample("jobqueue_worker_jobs_started_total", "other")
    failed_other = sample("jobqueue_worker_jobs_failed_total", "other")
    enqueue.create_job(enqueue.JobSpec("client.sent-this-type", max_attempts=1))
    enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0}))
    loop = one_job_loop(app, SETTINGS, "testhost:1:thread-1:5ca1ab1e")
    assert loop.step() and loop.step()
    assert sample("jobqueue_worker_jobs_started_total", "other") == started_other + 1
    assert sample("jobqueue_worker_jobs_failed_total", "other") == failed_other + 1
    assert (
        worker_metrics.REGISTRY.get_sample_value(
            "jobqueue_worker_jobs_started_total", {"type": "client.sent-this-type"}
        )
        is None
    )
    assert sample("jobqueue_worker_jobs_succeeded_total", "demo.success") >= 1
