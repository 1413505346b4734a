"""``/api/ready/``: 200 at the migration head, 503 behind it or without a database; and a
worker that refuses an older schema."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from sqlalchemy import text

from dashboard import create_app
from dashboard.extensions import db
from dashboard.ops.schema import UPGRADE_COMMAND, script_head
from tests.conftest import TEST_CONFIG


@contextmanager
def schema_at(app, revision: str) -> Iterator[None]:
    """Pretend the database is at ``revision`` (restored afterwards)."""
    with app.app_context(), db.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})
    try:
        yield
    finally:
        with app.app_context(), db.engine.begin() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": script_head()})


def test_ready_at_the_head(client):
    response = client.get("/api/ready/")
    assert response.status_code == 200
    body = response.get_json()
    assert body["ready"] is True and body["database"] == "ok" and body["schema"] == "current"
    assert body["revision"] == body["head"] == script_head()


def test_not_ready_behind_the_head_and_the_reason_names_the_command(app, client):
    with schema_at(app, "0003"):
        response = client.get("/api/ready/")
    assert response.status_code == 503
    body = response.get_json()
    assert body["ready"] is False and body["schema"] == "behind" and body["revision"] == "0003"
    assert UPGRADE_COMMAND in body["reason"]


def test_ready_when_a_newer_release_migrated_first(app, client):
    with schema_at(app, "9999_from_the_future"):
        response = client.get("/api/ready/")
    assert response.status_code == 200
    assert response.get_json()["schema"] == "ahead"


def test_not_ready_without_a_database():
    down = create_app({**TEST_CONFIG, "DATABASE_URL": "postgresql://nobody@127.0.0.1:9/none"})
    response = down.test_client().get("/api/ready/")
    assert response.status_code == 503
    body = response.get_json()
    assert body["database"] == "error" and body["schema"] == "unknown"
    assert body["reason"].startswith("database unreachable")


@pytest.mark.process
def test_worker_refuses_an_older_schema(app, start_worker):
    with schema_at(app, "0003"):
        worker = start_worker()
        assert worker.wait() != 0
    assert f"run `{UPGRADE_COMMAND}`" in worker.output
    assert "refusing to start" in worker.output
