"""A trace from the create to the attempt, across the test process (the web's doors, with the
SDK's in-memory exporter) and a real worker process (the SDK writing its spans to a file):
the first attempt's span is the creator's child, a retry's is linked to it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from dashboard.jobs import enqueue
from dashboard.store.reads import jobs as read_jobs
from tests.support.tracing import file_spans, hex_id
from tests.support.waiting import wait_until
from tests.support.worker_loop import wait_for_status

pytestmark = pytest.mark.process

pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry import trace  # noqa: E402

MODULES = "tests.runtime.traced_handlers"


def _worker_spans(path: Path, job_id: uuid.UUID, count: int) -> list[dict]:
    """The worker's ``... process`` spans of ``job_id``, once ``count`` are written, by attempt."""

    def found() -> list[dict]:
        spans = [s for s in file_spans(path) if s["attributes"].get("messaging.message.id") == str(job_id)]
        return spans if len(spans) >= count else []

    spans = wait_until(found, 30, f"{count} attempt spans of job {job_id}")
    return sorted(spans, key=lambda s: s["attributes"]["messaging.jobqueue.attempt"])


def test_the_attempt_continues_the_enqueuers_trace_and_a_retry_links_it(
    app, start_worker, memory_spans, tmp_path
):
    tracer = trace.get_tracer("test")
    with tracer.start_as_current_span("signup") as signup:
        first = enqueue("traced.work", {"n": 1}, queue="mail")
        flaky = enqueue("traced.work", {"fail_until": 2})
    creator = signup.get_span_context()
    expected = f"00-{creator.trace_id:032x}-{creator.span_id:016x}-{int(creator.trace_flags):02x}"
    assert read_jobs.get_job(first.id).traceparent == expected
    assert read_jobs.get_job(flaky.id).traceparent == expected
    assert [s.name for s in memory_spans.get_finished_spans()] == ["signup"]

    spans_file = tmp_path / "worker-spans.jsonl"
    start_worker(JOB_HANDLER_MODULES=MODULES, TEST_SPANS_FILE=str(spans_file))
    assert wait_for_status(first.id, "succeeded", "failed", timeout=60).status == "succeeded"
    assert wait_for_status(flaky.id, "succeeded", "failed", timeout=60).status == "succeeded"

    [span] = _worker_spans(spans_file, first.id, 1)
    assert span["name"] == "traced.work process" and span["kind"] == "SpanKind.CONSUMER"
    assert span["context"]["trace_id"] == hex_id(creator.trace_id, 32)
    assert span["parent_id"] == hex_id(creator.span_id, 16)  # the enqueuer's span, across processes
    assert span["links"] == []
    assert span["attributes"] == {
        "messaging.system": "jobqueue",
        "messaging.operation.type": "process",
        "messaging.message.id": str(first.id),
        "messaging.destination.name": "mail",
        "messaging.jobqueue.attempt": 1,
        "messaging.jobqueue.outcome": "succeeded",
    }
    assert span["status"]["status_code"] == "OK"
    inner = [s for s in file_spans(spans_file) if s["name"] == "inner work"]
    assert span["context"]["span_id"] in {s["parent_id"] for s in inner}  # the handler's spans nest

    failed, retried = _worker_spans(spans_file, flaky.id, 2)
    assert failed["parent_id"] == hex_id(creator.span_id, 16)
    assert failed["status"] == {
        "status_code": "ERROR",
        "description": "RuntimeError: partner down on attempt 1",
    }
    assert failed["attributes"]["messaging.jobqueue.outcome"] == "retried"
    [exception] = [e for e in failed["events"] if e["name"] == "exception"]
    assert exception["attributes"]["exception.type"] == "RuntimeError"
    # The retry is a trace of its own, linked to the enqueuer's span.
    assert retried["parent_id"] is None and retried["context"]["trace_id"] != hex_id(creator.trace_id, 32)
    assert [link["context"]["span_id"] for link in retried["links"]] == [hex_id(creator.span_id, 16)]
    assert retried["attributes"]["messaging.jobqueue.attempt"] == 2
    assert retried["status"]["status_code"] == "OK"


def test_a_job_created_outside_any_span_runs_in_a_root_span(app, start_worker, memory_spans, tmp_path):
    job = enqueue("traced.work")
    assert read_jobs.get_job(job.id).traceparent is None
    spans_file = tmp_path / "worker-spans.jsonl"
    start_worker(JOB_HANDLER_MODULES=MODULES, TEST_SPANS_FILE=str(spans_file))
    [span] = _worker_spans(spans_file, job.id, 1)
    assert span["parent_id"] is None and span["links"] == []
