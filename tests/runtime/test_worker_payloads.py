"""Payloads a demo handler cannot use fail the attempt with a clear ``PayloadError``.

Driven in-process, one :meth:`OneJobLoop.step` at a time: each hostile job is claimed, its
handler refuses the payload, the attempt is recorded as failed (retry scheduled, or failed for
good on its last attempt) with the field and the reason in ``last_error``, and the same loop
goes on to run the next job: a payload never ends a worker thread.
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.runtime.one_job import OneJobLoop
from dashboard.store.lifecycle import create as enqueue
from tests.support.timelines import job, story, timeline
from tests.support.worker_loop import SETTINGS, one_job_loop

WORKER_ID = "testhost:1:thread-1:feedface"
GARBAGE = {"a": [1, {"b": [None, True, "x" * 1000]}], "": {"": {"": []}}}

# (case id, job type, payload, the start of last_error)
REJECTED = [
    (
        "sleep as string",
        "demo.success",
        {"sleep_seconds": "1"},
        "PayloadError: sleep_seconds must be a number",
    ),
    (
        "NaN-like string",
        "demo.success",
        {"sleep_seconds": "NaN"},
        "PayloadError: sleep_seconds must be a number",
    ),
    (
        "Infinity string",
        "demo.slow",
        {"sleep_seconds": "Infinity"},
        "PayloadError: sleep_seconds must be a number",
    ),
    (
        "boolean sleep",
        "demo.success",
        {"sleep_seconds": True},
        "PayloadError: sleep_seconds must be a number",
    ),
    (
        "huge integer sleep",
        "demo.success",
        {"sleep_seconds": 10**30},
        "PayloadError: sleep_seconds must be between",
    ),
    (
        "huge float sleep",
        "demo.timeout",
        {"sleep_seconds": 1e308},
        "PayloadError: sleep_seconds must be between",
    ),
    ("negative sleep", "demo.slow", {"sleep_seconds": -1}, "PayloadError: sleep_seconds must be between"),
    (
        "nested garbage sleep",
        "demo.success",
        {"sleep_seconds": GARBAGE},
        "PayloadError: sleep_seconds must be a number",
    ),
    ("list payload", "demo.success", [1, 2, 3], "PayloadError: payload must be a JSON object, got list"),
    ("string payload", "demo.fail", "<script>", "PayloadError: payload must be a JSON object, got str"),
    ("number payload", "demo.flaky", 10**30, "PayloadError: payload must be a JSON object, got int"),
    ("error as number", "demo.fail", {"error": 42}, "PayloadError: error must be a string"),
    ("error as garbage", "demo.fail", {"error": GARBAGE}, "PayloadError: error must be a string"),
    (
        "attempt as string",
        "demo.flaky",
        {"fail_until_attempt": "2"},
        "PayloadError: fail_until_attempt must be",
    ),
    (
        "attempt as float",
        "demo.flaky",
        {"fail_until_attempt": 2.5},
        "PayloadError: fail_until_attempt must be",
    ),
    ("attempt zero", "demo.flaky", {"fail_until_attempt": 0}, "PayloadError: fail_until_attempt must be"),
    (
        "attempt boolean",
        "demo.flaky",
        {"fail_until_attempt": True},
        "PayloadError: fail_until_attempt must be",
    ),
]


def make_loop(app: Any) -> OneJobLoop:
    return one_job_loop(app, SETTINGS, WORKER_ID)


def assert_goes_on(loop: OneJobLoop) -> None:
    """The same loop claims and runs the next job to success."""
    following = enqueue.create_job(enqueue.JobSpec("demo.success", {"sleep_seconds": 0})).job
    assert loop.step() is True
    assert job(following.id).status == "succeeded"


@pytest.mark.parametrize(("max_attempts", "end"), [(3, "queued"), (1, "failed")])
@pytest.mark.parametrize(
    ("job_type", "payload", "error"), [c[1:] for c in REJECTED], ids=[c[0] for c in REJECTED]
)
def test_a_rejected_payload_fails_the_attempt_with_a_payload_error(
    app, job_type, payload, error, max_attempts, end
):
    created = enqueue.create_job(enqueue.JobSpec(job_type, payload, max_attempts=max_attempts)).job
    loop = make_loop(app)

    assert loop.step() is True

    failed = job(created.id)
    assert failed.status == end and failed.attempts == 1 and failed.result is None
    assert failed.last_error.startswith(error), failed.last_error
    assert failed.locked_by is None
    last = timeline(created.id)[-1]
    assert last.type == ("retry_scheduled" if end == "queued" else "failed")
    assert last.message == failed.last_error and last.data["exception_type"] == "PayloadError"
    assert last.worker_id == WORKER_ID
    assert_goes_on(loop)


def test_numbers_too_big_for_a_float_are_refused_by_the_handler(app):
    """``1e400`` written by another client (psql) is valid jsonb; it reads back as a 401-digit int."""
    created = enqueue.create_job(enqueue.JobSpec("demo.success", {}, max_attempts=1)).job
    with db.engine.begin() as conn:
        conn.execute(
            text("UPDATE jobs_job SET payload = '{\"sleep_seconds\": 1e400}'::jsonb WHERE id = :id"),
            {"id": created.id},
        )
    loop = make_loop(app)
    assert loop.step() is True
    failed = job(created.id)
    assert failed.status == "failed"
    assert failed.last_error.startswith("PayloadError: sleep_seconds must be between 0 and 3600, got 1000")
    assert story(created.id) == [("created", 0), ("claimed", 1), ("failed", 1)]
    assert_goes_on(loop)


def test_markup_in_an_error_payload_is_recorded_as_it_was_raised(app):
    """``demo.fail`` raises the payload's own text; it is stored as is (pages escape it)."""
    created = enqueue.create_job(
        enqueue.JobSpec("demo.fail", {"error": "<script>x</script> \u202e"}, max_attempts=1)
    ).job
    loop = make_loop(app)
    assert loop.step() is True
    failed = job(created.id)
    assert failed.status == "failed" and failed.last_error == "DemoError: <script>x</script> \u202e"
    assert_goes_on(loop)


def _nest_beyond_the_parser(job_id: Any) -> None:
    """Nesting no door accepts (they stop at 100 levels) but jsonb does: a row written by psql."""
    deep = '{"a": ' * 3000 + "1" + "}" * 3000
    with db.engine.begin() as conn:
        conn.execute(
            text("UPDATE jobs_job SET payload = CAST(:payload AS jsonb) WHERE id = :id"),
            {"payload": deep, "id": job_id},
        )


def test_a_payload_nested_beyond_the_json_parser_fails_the_attempt_clearly(app):
    """The claim reads it as a stand-in (``jsonb.UnreadableJson``); no handler is given that."""
    created = enqueue.create_job(enqueue.JobSpec("demo.success", {}, max_attempts=1)).job
    _nest_beyond_the_parser(created.id)
    loop = make_loop(app)
    assert loop.step() is True
    failed = job(created.id)
    assert failed.status == "failed"  # demo.success, had it run, would have succeeded
    assert failed.last_error.startswith("UnreadablePayload: the payload is JSON nested too deeply")
    assert story(created.id) == [("created", 0), ("claimed", 1), ("failed", 1)]
    assert_goes_on(loop)


def test_pages_listing_a_payload_nested_beyond_the_json_parser_still_render(app, client):
    created = enqueue.create_job(enqueue.JobSpec("demo.success", {})).job
    _nest_beyond_the_parser(created.id)
    assert client.get("/jobs/").status_code == 200
    page = client.get(f"/jobs/{created.id}/")
    assert page.status_code == 200 and b"nested too deeply to decode" in page.data
    answer = client.get(f"/api/jobs/{created.id}/")
    assert answer.status_code == 200
    assert answer.get_json()["payload"].startswith("(JSON value nested too deeply to decode here:")
    assert client.get("/api/jobs/").status_code == 200
