"""A real ``flask worker`` with ``--metrics-port`` and ``LOG_FORMAT=json``: its metrics against
known work, the web's ``/metrics`` for the same work, and its log lines parsed as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta

import pytest

from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import stats_refresh
from dashboard.store.values import utcnow
from tests.support.factories import make_job
from tests.support.stack import free_port
from tests.support.waiting import wait_until
from tests.support.worker_process import PROJECT_ROOT, subprocess_env

from .helpers import parse, scrape, scrape_app, value

pytestmark = pytest.mark.process


def test_worker_metrics_and_json_logs_match_the_work_done(app, start_worker):
    ok = [enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job for _ in range(3)]
    flaky = enqueue.create_job(enqueue.JobSpec("demo.fail", {"error": "nope"}, max_attempts=2)).job
    # a dead worker's attempt whose lease expired: recovered, requeued, then run
    lost = make_job("running", locked_until=utcnow() - timedelta(seconds=5), payload={"sleep_seconds": 0})
    port = free_port()
    worker = start_worker("--metrics-port", str(port), LOG_FORMAT="json")
    url = f"http://127.0.0.1:{port}/metrics"

    def done() -> bool:
        jobs = [read_jobs.get_job(j.id) for j in (*ok, flaky, lost)]
        return all(j.status in {"succeeded", "failed"} for j in jobs)

    wait_until(done, 30, "every job to finish")
    wait_until(lambda: value(scrape(url), "jobqueue_worker_jobs_failed_total", type="demo.fail"), 10)
    samples = scrape(url)
    assert value(samples, "jobqueue_worker_jobs_started_total", type="demo.success") == 4
    assert value(samples, "jobqueue_worker_jobs_succeeded_total", type="demo.success") == 4
    assert value(samples, "jobqueue_worker_jobs_started_total", type="demo.fail") == 2
    assert value(samples, "jobqueue_worker_jobs_retried_total", type="demo.fail") == 1
    assert value(samples, "jobqueue_worker_jobs_failed_total", type="demo.fail") == 1
    assert value(samples, "jobqueue_worker_job_duration_seconds_count", type="demo.success") == 4
    assert value(samples, "jobqueue_worker_leases_recovered_total", outcome="requeued") == 1
    claims = sum(v for (name, _), v in samples.items() if name == "jobqueue_worker_claim_seconds_count")
    assert claims >= 1
    assert value(samples, "jobqueue_worker_busy_threads") == 0
    assert value(samples, "jobqueue_worker_listen_connected") == 1
    assert value(samples, "jobqueue_worker_threads") == 2

    stats_refresh.refresh_finished_counts()
    web = parse(scrape_app(app).get_data(as_text=True))
    assert value(web, "jobqueue_jobs", status="succeeded") == 4
    assert value(web, "jobqueue_jobs", status="failed") == 1
    assert value(web, "jobqueue_jobs", status="queued") == 0

    lines = [json.loads(line) for line in worker.output.splitlines() if line.strip()]  # every line
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    attempt = next(line for line in lines if line.get("job_id") == str(flaky.id) and line.get("attempt") == 2)
    assert attempt["job_type"] == "demo.fail" and attempt["worker_id"].count(":") == 3
    assert "failed for good" in attempt["message"]


def test_web_lines_are_json_with_the_request_id(libpq_url):
    """A refused API request in production mode, as the web process logs it."""
    script = (
        "from dashboard import create_app\n"
        "c = create_app().test_client()\n"
        "c.get('/api/jobs/', headers={'Authorization': 'Bearer ' + 'x' * 40, 'X-Request-ID': 'req-42'})\n"
    )
    env = subprocess_env(
        libpq_url,
        LOG_FORMAT="json",
        SECRET_KEY="Vq3r-9ZkT_w2LmX8pYb4NcH7sJd0FgUe6AoRi1",  # random-looking: the entropy check
        API_TOKENS="deploy:operator:" + "t" * 40,
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.strip()]
    refused = next(line for line in lines if "API request refused" in line["message"])
    assert refused["request_id"] == "req-42" and refused["level"] == "WARNING"
    assert "t" * 40 not in done.stderr and "x" * 40 not in done.stderr  # no token in any line
