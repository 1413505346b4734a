"""The create doors record the current trace (API, bulk, form, enqueue_many); the job page
shows the trace id, linked through TRACE_URL_TEMPLATE, and the snoozes; the setting's rules."""

from __future__ import annotations

import dataclasses

import pytest

from dashboard.config import settings_of
from dashboard.config.parsers import ConfigError
from dashboard.config.settings import Settings
from dashboard.jobs import enqueue_many
from dashboard.state import state_of
from dashboard.store import lifecycle
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.reads import jobs as read_jobs
from dashboard.store.reads import lists

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _traceparent(span) -> str:
    c = span.get_span_context()
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


def test_every_create_door_records_the_current_trace(app, client, token, memory_spans):
    from opentelemetry import trace

    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("request") as span:
        one = client.post("/api/jobs/", json={"type": "demo.success"}).get_json()
        bulk = client.post("/api/jobs/bulk/", json={"jobs": [{"type": "demo.success"}] * 2}).get_json()
        form = client.post(
            "/jobs/new/",
            data={
                "csrf_token": token,
                "type": "demo.form",
                "payload": "{}",
                "priority": "50",
                "max_attempts": "3",
            },
        )
        many = enqueue_many([{"type": "demo.success"}, {"type": "demo.success", "depends_on": [0]}])
    expected = _traceparent(span)
    assert one["traceparent"] == expected and read_jobs.get_job(one["id"]).traceparent == expected
    assert [r["job"]["traceparent"] for r in bulk["results"]] == [expected, expected]
    assert form.status_code in (302, 303)
    [made] = lists.list_jobs(limit=10, offset=0, type="demo.form").results
    assert made.traceparent == expected
    assert [read_jobs.get_job(j.id).traceparent for j in many] == [expected, expected]
    outside = client.post("/api/jobs/", json={"type": "demo.success"}).get_json()
    assert outside["traceparent"] is None  # no span current


def test_no_trace_is_recorded_without_a_tracer_provider(app, client):
    job = client.post("/api/jobs/", json={"type": "demo.success"}).get_json()
    assert job["traceparent"] is None and job["snoozes"] == 0


def _page(client, job_id) -> str:
    return client.get(f"/jobs/{job_id}/").get_data(as_text=True)


def test_the_job_page_links_the_trace_id_through_the_template(app, client, monkeypatch):
    job = enqueue.create_job(enqueue.JobSpec("demo.success", traceparent=TRACEPARENT)).job
    html = _page(client, job.id)
    assert (
        '<dd class="mono wrap" data-field="trace">4bf92f3577b34da6a3ce929d0e0e4736</dd>' in html
    )  # unset: text
    settings = settings_of(app)
    ops = dataclasses.replace(settings.ops, trace_url_template="https://jaeger.example/trace/{trace_id}")
    monkeypatch.setattr(state_of(app), "settings", dataclasses.replace(settings, ops=ops))
    html = _page(client, job.id)
    assert (
        '<a href="https://jaeger.example/trace/4bf92f3577b34da6a3ce929d0e0e4736" rel="noopener noreferrer">'
        "4bf92f3577b34da6a3ce929d0e0e4736</a>"
    ) in html
    plain = enqueue.create_job(enqueue.JobSpec("demo.success")).job
    assert 'data-field="trace"' not in _page(client, plain.id)


def test_the_job_page_and_json_count_the_snoozes(app, client):
    job = enqueue.create_job(enqueue.JobSpec("demo.success", max_attempts=3)).job
    for _ in range(2):
        claimed = lifecycle.claim_next_job("w", lease_seconds=30)
        lifecycle.snooze_job(claimed.id, "w", claimed.attempts, 0, max_snoozes=100, cap_error="x")
    lifecycle.claim_next_job("w", lease_seconds=30)
    html = _page(client, job.id)
    assert "3 of 5" in html
    assert (
        '<dd data-field="snoozes">2 <span class="muted">(not counted: 1 of 3 attempts spent)</span></dd>'
        in html
    )
    body = client.get(f"/api/jobs/{job.id}/").get_json()
    assert (body["attempts"], body["max_attempts"], body["snoozes"]) == (3, 5, 2)


@pytest.mark.parametrize(
    "value",
    [
        "jaeger/{trace_id}",
        "https://tempo.example/trace",
        "https://x.example/{trace_id} x",
        "ftp://x/{trace_id}",
    ],
)
def test_a_bad_trace_url_template_is_refused_at_start(value):
    with pytest.raises(ConfigError, match="TRACE_URL_TEMPLATE"):
        Settings.from_env({"TRACE_URL_TEMPLATE": value})


def test_a_template_with_other_braces_keeps_them(app, client, monkeypatch):
    template = 'https://grafana.example/explore?left={"queries":[{"query":"{trace_id}"}]}'
    assert Settings.from_env({"TRACE_URL_TEMPLATE": template}).ops.trace_url_template == template
    job = enqueue.create_job(enqueue.JobSpec("demo.success", traceparent=TRACEPARENT)).job
    settings = settings_of(app)
    ops = dataclasses.replace(settings.ops, trace_url_template=template)
    monkeypatch.setattr(state_of(app), "settings", dataclasses.replace(settings, ops=ops))
    html = _page(client, job.id)
    assert (
        'href="https://grafana.example/explore?left={&#34;queries&#34;:[{&#34;query&#34;:'
        '&#34;4bf92f3577b34da6a3ce929d0e0e4736&#34;}]}"'
    ) in html


def test_a_trace_url_template_is_read(app):
    settings = Settings.from_env({"TRACE_URL_TEMPLATE": " https://ui.honeycomb.io/t?trace_id={trace_id} "})
    assert settings.ops.trace_url_template == "https://ui.honeycomb.io/t?trace_id={trace_id}"
    assert Settings.from_env({}).ops.trace_url_template is None
