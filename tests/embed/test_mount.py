"""JobQueue mounted in a host's own Flask app, under /ops/jobs, on the host's db, behind its authorize."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import text
from werkzeug.exceptions import HTTPException

from dashboard import JobQueue, jobs
from dashboard.store.reads import jobs as read_jobs
from tests.embed.host import OPERATOR_TOKEN, PREFIX, VIEWER_TOKEN, host_with_tables, make_host

CSRF_FIELD = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')


@pytest.fixture
def host(app: Flask, database_url: str) -> Iterator[tuple[Flask, SQLAlchemy, type]]:
    """The host on the test database (migrated by the ``app`` fixture, emptied before each test)."""
    with host_with_tables(database_url) as made:
        yield made


def created_events(db: SQLAlchemy, host_app: Flask) -> list[dict]:
    with host_app.app_context():
        rows = db.session.execute(text("SELECT data FROM jobs_jobevent WHERE type = 'created' ORDER BY id"))
        found = [row[0] for row in rows]
        db.session.rollback()
    return found


def as_role(client: FlaskClient, role: str | None) -> dict[str, str]:
    return {"X-Host-Role": role} if role else {}


def test_pages_and_static_files_are_under_the_prefix(host: tuple[Flask, SQLAlchemy, type]) -> None:
    client = host[0].test_client()
    page = client.get(PREFIX + "/", headers=as_role(client, "viewer"))
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert f'href="{PREFIX}/static/app.css"' in html
    assert f'href="{PREFIX}/api/docs/"' in html
    assert f'href="{PREFIX}/jobs/' in html
    css = client.get(PREFIX + "/static/app.css")
    assert css.status_code == 200 and b"{" in css.data
    css.close()
    assert client.get(PREFIX + "/jobs/", headers=as_role(client, "viewer")).status_code == 200
    assert client.get("/jobs/", headers=as_role(client, "viewer")).status_code == 404  # not at the root


def test_the_host_s_own_routes_get_nothing_of_the_queue(host: tuple[Flask, SQLAlchemy, type]) -> None:
    client = host[0].test_client()
    own = client.get("/")
    assert own.get_data(as_text=True) == "the shop"
    assert "Content-Security-Policy" not in own.headers
    assert "X-Request-ID" not in own.headers
    assert own.headers.get("Cache-Control") is None
    assert client.post("/orders").status_code == 201  # no CSRF check of the queue's on the host's forms
    queue_page = client.get(PREFIX + "/", headers=as_role(client, "viewer"))
    assert "Content-Security-Policy" in queue_page.headers and "X-Request-ID" in queue_page.headers


@pytest.mark.parametrize("path", ["/", "/jobs/", "/events/", "/workers/", "/jobs/new/"])
def test_authorize_none_refuses_every_page(host: tuple[Flask, SQLAlchemy, type], path: str) -> None:
    client = host[0].test_client()
    assert client.get(PREFIX + path).status_code == 403
    assert client.get(PREFIX + path, headers={"X-Host-Role": "admin"}).status_code == 403  # not a role


def test_the_queue_s_own_sign_in_pages_do_not_exist_in_a_host(host: tuple[Flask, SQLAlchemy, type]) -> None:
    client = host[0].test_client()
    assert client.get(PREFIX + "/login/", headers=as_role(client, "operator")).status_code == 404


def _csrf(client: FlaskClient, role: str) -> str:
    page = client.get(PREFIX + "/jobs/new/", headers=as_role(client, role))
    assert page.status_code == 200
    found = CSRF_FIELD.search(page.get_data(as_text=True))
    assert found is not None
    return found.group(1)


def test_a_viewer_reads_but_may_not_create(host: tuple[Flask, SQLAlchemy, type]) -> None:
    client = host[0].test_client()
    assert client.get(PREFIX + "/jobs/new/", headers=as_role(client, "viewer")).status_code == 403
    form = {"type": "demo.success", "payload": "{}", "priority": "50", "max_attempts": "3"}
    token = _csrf(client, "operator")
    refused = client.post(
        PREFIX + "/jobs/new/", data={**form, "csrf_token": token}, headers=as_role(client, "viewer")
    )
    assert refused.status_code == 403
    assert created_events(host[1], host[0]) == []


def test_an_operator_creates_with_the_csrf_token_and_not_without(
    host: tuple[Flask, SQLAlchemy, type],
) -> None:
    client = host[0].test_client()
    form = {"type": "demo.success", "payload": "{}", "priority": "50", "max_attempts": "3"}
    missing = client.post(PREFIX + "/jobs/new/", data=form, headers=as_role(client, "operator"))
    assert missing.status_code == 400
    token = _csrf(client, "operator")
    made = client.post(
        PREFIX + "/jobs/new/", data={**form, "csrf_token": token}, headers=as_role(client, "operator")
    )
    assert made.status_code == 303
    assert made.headers["Location"].startswith(PREFIX + "/jobs/")
    detail = client.get(made.headers["Location"], headers=as_role(client, "viewer"))
    assert detail.status_code == 200 and "demo.success" in detail.get_data(as_text=True)
    [data] = created_events(host[1], host[0])
    assert (data["source"], data["actor"], data["role"], data["credential"]) == (
        "dashboard",
        "host",
        "operator",
        "host",
    )


def test_the_api_is_under_the_prefix_and_needs_a_bearer_token(host: tuple[Flask, SQLAlchemy, type]) -> None:
    client = host[0].test_client()
    assert client.get(PREFIX + "/api/health/").status_code == 401  # not open in a host's app
    assert client.get(PREFIX + "/api/health/", headers=as_role(client, "viewer")).status_code == 200
    assert (
        client.get(PREFIX + "/api/health/", headers={"Authorization": f"Bearer {VIEWER_TOKEN}"}).status_code
        == 200
    )
    assert client.get("/api/health/").status_code == 404
    # The host's authorize does not open the API: a cookie must not make it writable cross-site.
    no_token = client.get(PREFIX + "/api/jobs/", headers=as_role(client, "operator"))
    assert no_token.status_code == 401 and no_token.is_json
    viewer = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    assert client.get(PREFIX + "/api/jobs/", headers=viewer).status_code == 200
    assert (
        client.post(PREFIX + "/api/jobs/", json={"type": "demo.success"}, headers=viewer).status_code == 403
    )
    created = client.post(PREFIX + "/api/jobs/", json={"type": "demo.success"}, headers=operator)
    assert created.status_code == 201
    unknown = client.get(PREFIX + "/api/jobs/00000000-0000-0000-0000-000000000000/", headers=viewer)
    assert unknown.status_code == 404 and unknown.is_json  # the API's JSON errors under the prefix
    assert client.get(PREFIX + "/metrics").status_code == 401
    assert client.get(PREFIX + "/metrics", headers=viewer).status_code == 200


def test_enqueue_joins_the_host_s_session_transaction(host: tuple[Flask, SQLAlchemy, type]) -> None:
    host_app, db, order_model = host
    with host_app.app_context():
        db.session.add(order_model(item="kept"))
        kept = jobs.enqueue("demo.success", {"order": "kept"}, connection=db.session)
        db.session.commit()
        db.session.add(order_model(item="dropped"))
        dropped = jobs.enqueue("demo.success", {"order": "dropped"}, connection=db.session)
        db.session.rollback()
        assert [o.item for o in db.session.query(order_model).all()] == ["kept"]
        assert read_jobs.get_job(kept.id) is not None
        assert read_jobs.get_job(dropped.id) is None


def test_the_host_keeps_its_own_error_pages(app: Flask, database_url: str) -> None:
    def own_error_pages(host_app: Flask) -> None:  # set up before the queue is mounted
        @host_app.errorhandler(HTTPException)
        def shop_http_error(error: HTTPException) -> tuple[str, int]:
            return f"the shop's {error.code} page", error.code or 500

        @host_app.errorhandler(Exception)
        def shop_error(error: Exception) -> tuple[str, int]:
            return "the shop's error page", 500

        @host_app.get("/broken")
        def broken() -> str:
            raise LookupError("a bug of the host's")

    host_app, db, _ = make_host(database_url, setup=own_error_pages)
    client = host_app.test_client()
    assert client.get("/no-such-page").get_data(as_text=True) == "the shop's 404 page"
    assert client.get("/broken").get_data(as_text=True) == "the shop's error page"
    # The queue's own API still answers JSON from its views, its refusal included.
    refused = client.get(PREFIX + "/api/jobs/")
    assert refused.is_json and refused.status_code == 401
    with host_app.app_context():
        db.engine.dispose()


def test_a_second_mount_on_one_app_is_refused(host: tuple[Flask, SQLAlchemy, type]) -> None:
    host_app, db, _ = host
    with pytest.raises(RuntimeError, match="already mounted"):
        JobQueue().init_app(host_app, db=db, url_prefix="/other")


def test_bad_mount_arguments_are_named(database_url: str) -> None:
    bare = Flask("bare")
    bare.config["SQLALCHEMY_DATABASE_URI"] = database_url
    db = SQLAlchemy()
    with pytest.raises(ValueError, match="db must be set up on this app first"):
        JobQueue(bare, db=db, url_prefix="/q", authorize=lambda request: None)
    db.init_app(bare)
    with pytest.raises(ValueError, match="url_prefix must be a path"):
        JobQueue(bare, db=db, url_prefix="ops", authorize=lambda request: None)
    with pytest.raises(TypeError, match="authorize must be"):
        JobQueue(bare, db=db, url_prefix="/q", authorize="operator")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="db must be the app's Flask-SQLAlchemy"):
        JobQueue(bare, db="postgresql://", url_prefix="/q")  # type: ignore[arg-type]


def test_the_queue_s_commands_are_on_the_host_s_cli(host: tuple[Flask, SQLAlchemy, type]) -> None:
    runner = host[0].test_cli_runner()
    assert "--threads" in runner.invoke(args=["worker", "--help"]).output
    listed = runner.invoke(args=["jobqueue", "--help"]).output
    for name in ("upgrade", "prune", "hash-password", "new-token"):
        assert name in listed
    pruned = runner.invoke(args=["jobqueue", "prune", "--dry-run"])
    assert pruned.exit_code == 0, pruned.output
