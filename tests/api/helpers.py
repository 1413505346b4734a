"""Shortcuts for API tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask
from sqlalchemy import text

from dashboard import create_app
from dashboard.extensions import db
from tests.open_access import OPEN_ACCESS

TEST_TYPE = "test.api"  # registered by the `job_type` fixture

JOB_FIELDS = [
    "id", "type", "payload", "status", "priority", "available_at", "attempts", "max_attempts",
    "idempotency_key", "locked_by", "locked_until", "last_error", "result", "created_at",
    "updated_at", "finished_at",
]  # fmt: skip
EVENT_FIELDS = ["id", "job", "type", "attempt", "worker_id", "message", "data", "created_at"]


def table_snapshot() -> dict[str, Any]:
    """Every row of both tables, to prove a request changed nothing."""
    with db.engine.connect() as conn:
        jobs = conn.execute(text("SELECT * FROM jobs_job ORDER BY id")).mappings().all()
        events = conn.execute(text("SELECT * FROM jobs_jobevent ORDER BY id")).mappings().all()
    return {"jobs": [dict(r) for r in jobs], "events": [dict(r) for r in events]}


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
