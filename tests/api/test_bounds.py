"""What one API request may cost the database: reads under the statement timeout (503 saying
so), and `offset` capped at API_OFFSET_MAX (400 saying how to narrow the filter)."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from flask import Flask

from dashboard.config import API_OFFSET_MAX
from dashboard.state import state_of
from tests.support.factories import make_job


def _with_settings(app: Flask, monkeypatch: pytest.MonkeyPatch, **changes: object) -> None:
    settings = state_of(app).settings
    monkeypatch.setattr(state_of(app), "settings", dataclasses.replace(settings, **changes))


def test_an_offset_past_the_cap_is_a_400_saying_how_to_narrow_the_filter(app, client):
    make_job("queued")
    assert client.get(f"/api/jobs/?offset={API_OFFSET_MAX}").status_code == 200
    refused = client.get(f"/api/jobs/?offset={API_OFFSET_MAX + 1}")
    assert refused.status_code == 400
    (message,) = refused.get_json()["errors"]["offset"]
    assert f"at most {API_OFFSET_MAX}" in message and "API_OFFSET_MAX" in message and "Narrow" in message


def test_the_cap_is_a_setting_the_schema_and_the_next_link_follow(app, client, monkeypatch):
    _with_settings(app, monkeypatch, api_offset_max=4)
    for _ in range(9):
        make_job("queued")
    assert client.get("/api/jobs/?offset=5").status_code == 400
    page = client.get("/api/jobs/?offset=2&limit=2").get_json()
    assert page["next"] is not None and "offset=4" in page["next"]
    last = client.get("/api/jobs/?offset=4&limit=2").get_json()  # 9 jobs, but offset 6 is past the cap
    assert last["next"] is None and len(last["results"]) == 2
    document = client.get("/api/schema/").get_json()
    offset = next(p for p in document["paths"]["/api/jobs/"]["get"]["parameters"] if p["name"] == "offset")
    assert offset["schema"]["maximum"] == 4


@contextmanager
def table_locked(libpq_url: str, *, release_after: float) -> Iterator[None]:
    """Another session holds ACCESS EXCLUSIVE on jobs_job (every read waits), and lets go after
    ``release_after`` seconds at the latest, so a read without a timeout waits that long, not forever."""
    locked, done = threading.Event(), threading.Event()

    def hold() -> None:
        with psycopg.connect(libpq_url) as conn:
            conn.execute("LOCK TABLE jobs_job IN ACCESS EXCLUSIVE MODE")
            locked.set()
            done.wait(release_after)
            conn.rollback()

    holder = threading.Thread(target=hold)
    holder.start()
    assert locked.wait(10)
    try:
        yield
    finally:
        done.set()
        holder.join()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("get", "/api/jobs/", None),
        ("get", "/api/jobs/?q=timeout", None),
        ("get", "/api/jobs/stats/", None),
        ("post", "/api/jobs/bulk-retry/", {"dry_run": True}),
    ],
)
def test_a_read_past_the_statement_timeout_is_a_503_saying_so(
    app, client, monkeypatch, libpq_url, method, path, body
):
    make_job("queued")
    _with_settings(app, monkeypatch, dashboard_query_timeout_ms=200)
    send = getattr(client, method)
    with table_locked(libpq_url, release_after=5):
        answer = send(path, json=body)
    assert answer.status_code == 503, answer.get_data(as_text=True)
    detail = answer.get_json()["detail"]
    assert "DASHBOARD_QUERY_TIMEOUT_MS = 200 ms" in detail and "Narrow" in detail
    assert send(path, json=body).status_code == 200  # the lock is gone: the same request answers


def test_the_document_is_built_once_per_settings(app, client, monkeypatch):
    """The OpenAPI document is built on first use and reused by both doors, and built again
    when the app's settings are replaced (its bounds follow them)."""
    from dashboard.api import docs

    built = []
    real = docs.build_document
    monkeypatch.setattr(docs, "build_document", lambda *args: built.append(1) or real(*args))
    monkeypatch.setattr(state_of(app), "openapi", None)
    first = client.get("/api/schema/").get_data()
    assert client.get("/api/schema/").get_data() == first and client.get("/api/docs/").status_code == 200
    assert len(built) == 1
    _with_settings(app, monkeypatch, api_offset_max=7)
    document = client.get("/api/schema/").get_json()
    offset = next(p for p in document["paths"]["/api/jobs/"]["get"]["parameters"] if p["name"] == "offset")
    assert offset["schema"]["maximum"] == 7 and len(built) == 2
