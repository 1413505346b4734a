"""JOB_DEMO_HANDLERS: the demo types exist in development and only on request in production."""

from __future__ import annotations

from dashboard.runtime import handlers

from .helpers import another_app

DEMO_TYPES = {"demo.success", "demo.fail", "demo.slow", "demo.timeout", "demo.flaky"}


def test_production_has_no_demo_types_unless_asked(app, database_url):
    strict = {"JOB_TYPES_STRICT": "true"}  # refuse unregistered types (any type is accepted otherwise)
    with another_app(DATABASE_URL=database_url, JOB_DEMO_HANDLERS="", **strict) as production:
        client = production.test_client()
        types = set(client.get("/api/config/").get_json()["job_types"])
        refused = client.post("/api/jobs/", json={"type": "demo.timeout"})
        form = client.get("/jobs/new/").get_data(as_text=True)
        with production.app_context():
            assert handlers.get_handler("demo.timeout") is None  # a worker would not run it
    assert not types & DEMO_TYPES
    assert refused.status_code == 400
    assert "demo.timeout" not in form


def test_development_and_the_setting_turn_them_on(app, database_url):
    with another_app(DATABASE_URL=database_url, DEBUG="true", JOB_DEMO_HANDLERS="") as development:
        types = set(development.test_client().get("/api/config/").get_json()["job_types"])
    assert types >= DEMO_TYPES
    with another_app(DATABASE_URL=database_url, JOB_DEMO_HANDLERS="true") as opted_in, opted_in.app_context():
        assert handlers.get_handler("demo.timeout") is not None
    with another_app(DATABASE_URL=database_url, DEBUG="true", JOB_DEMO_HANDLERS="false") as opted_out:
        types = set(opted_out.test_client().get("/api/config/").get_json()["job_types"])
    assert not types & DEMO_TYPES
