"""Shortcuts for API tests."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from flask import Flask

from dashboard import create_app
from dashboard.extensions import db
from dashboard.store.records import JobRecord
from dashboard.store.states import WAITING_AT
from tests.support.factories import record
from tests.support.open_access import OPEN_ACCESS
from tests.support.timelines import table_snapshot  # noqa: F401  (this folder's tests use it)

TEST_TYPE = "test.api"  # registered by the `job_type` fixture

JOB_FIELDS = [
    "id", "type", "payload", "status", "priority", "available_at", "attempts", "max_attempts",
    "idempotency_key", "locked_by", "locked_until", "last_error", "result", "created_at",
    "updated_at", "finished_at", "queue", "depends_on", "on_parent_failure", "workflow", "waiting_on",
    "unique_key", "unique_for", "unique_while",
    "snoozes", "traceparent",
]  # fmt: skip
EVENT_FIELDS = ["id", "job", "type", "attempt", "worker_id", "message", "data", "created_at"]

# Records of every status and payload kind, for the answers rendered without the Job model
# (outputs.job_json, outputs.bulk_results_json), checked against the model's bytes.
RENDERED = datetime(2030, 7, 1, 12, 0, tzinfo=UTC)
RECORD_SHAPES = [
    {"payload": {"i": 1, "é": [0.1, -0.0, 1e300, None, True, "ü\u2028"]}},
    {
        "available_at": RENDERED,
        "idempotency_key": "k",
        "payload": [1, "two"],
        "unique_key": "u:1",
        "unique_for": 90.5,
        "unique_while": "queued",
    },
    {"status": "running", "attempts": 1, "locked_by": "w-1", "locked_until": RENDERED, "payload": "x"},
    {"status": "succeeded", "attempts": 2, "result": {"ok": [1, 2.5]}, "finished_at": RENDERED},
    {"status": "failed", "attempts": 3, "last_error": "boom", "finished_at": RENDERED},
    {  # waiting for two parents, in a workflow
        "available_at": WAITING_AT,
        "depends_on": [uuid.UUID(int=1), uuid.UUID(int=2)],
        "on_parent_failure": "run",
        "workflow": "nightly ü",
        "waiting_on": 2,
    },
]


def shaped_record(fields: dict[str, Any]) -> JobRecord:
    """A record of :data:`RECORD_SHAPES`, created at a time with microseconds."""
    return record(now=datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), **{"status": "queued", **fields})


def create(client, job_type: str, **body: Any) -> dict[str, Any]:
    """Create a job through the API and return its JSON (asserting it was created)."""
    response = client.post("/api/jobs/", json={"type": job_type, **body})
    assert response.status_code == 201, response.get_json()
    return response.get_json()


@contextmanager
def another_app(**config: str) -> Iterator[Flask]:
    """An app built with different settings (``TIME_ZONE``, ``DATABASE_URL``, ...), disposed after."""
    app = create_app({"TESTING": True, "DEBUG": "false", "ENABLE_DEBUG_TOOLBAR": "false",
                      "AUTO_MIGRATE": "false", **OPEN_ACCESS, **config})  # fmt: skip
    try:
        yield app
    finally:
        with app.app_context():
            db.engine.dispose()
