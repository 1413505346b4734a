"""A host whose own names are the queue's old plain ones: an ``api`` blueprint, ``base.html``,
``error.html``, ``workers.html`` and ``macros.html`` templates, context variables and filters
named like the queue's. Each keeps its meaning in the host's pages, and the queue's pages are
the queue's."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Blueprint, Flask, render_template_string
from flask_sqlalchemy import SQLAlchemy
from jinja2 import DictLoader

from dashboard import JobQueue
from tests.embed.host import OPERATOR_TOKEN, PREFIX, VIEWER_TOKEN, host_with_tables

HOST_TEMPLATES = {
    name: f"the host's own {name}"
    for name in ("base.html", "error.html", "workers.html", "overview.html", "jobs/list.html")
}
HOST_TEMPLATES["macros.html"] = "{% macro when(x) %}host{% endmacro %}"


def colliding(host_app: Flask) -> None:
    """Everything of the host's that shares a name with the queue, set up before the mount."""
    host_app.jinja_loader = DictLoader(HOST_TEMPLATES)
    api = Blueprint("api", __name__)
    web = Blueprint("web", __name__)

    @api.get("/v1/ping")
    def ping() -> str:
        return "host api"

    @web.get("/page")
    def page() -> str:
        return render_template_string(
            "{{ access }} {{ limits }} {{ rules }} {{ csrf_token }} {{ queue_static }} {{ worker_alarm }}"
            " {{ 3|duration }}"
        )

    host_app.register_blueprint(api, url_prefix="/host-api")
    host_app.register_blueprint(web)
    host_app.context_processor(
        lambda: {
            "access": "host access",
            "limits": "host limits",
            "rules": "host rules",
            "csrf_token": "host csrf",
            "queue_static": "host static",
            "worker_alarm": "host alarm",
        }
    )
    host_app.add_template_filter(lambda value: f"{value} host seconds", "duration")


@pytest.fixture
def host(app: Flask, database_url: str) -> Iterator[tuple[Flask, SQLAlchemy, type]]:
    with host_with_tables(database_url, setup=colliding) as made:
        yield made


def viewer(role: str = "viewer") -> dict[str, str]:
    return {"X-Host-Role": role}


def test_the_host_s_blueprints_templates_and_variables_keep_their_meaning(
    host: tuple[Flask, SQLAlchemy, type],
) -> None:
    client = host[0].test_client()
    assert client.get("/host-api/v1/ping").get_data(as_text=True) == "host api"
    own = client.get("/page").get_data(as_text=True)
    assert own == "host access host limits host rules host csrf host static host alarm 3 host seconds"


@pytest.mark.parametrize(
    "path", ["/", "/jobs/", "/workers/", "/queues/", "/schedules/", "/events/", "/jobs/new/"]
)
def test_the_queue_s_pages_use_the_queue_s_templates(host: tuple[Flask, SQLAlchemy, type], path: str) -> None:
    client = host[0].test_client()
    page = client.get(PREFIX + path, headers=viewer("operator"))
    html = page.get_data(as_text=True)
    assert page.status_code == 200, html[:500]
    assert "the host's own" not in html
    assert f'href="{PREFIX}/static/app.css"' in html


def test_the_queue_s_error_page_is_the_queue_s(host: tuple[Flask, SQLAlchemy, type]) -> None:
    client = host[0].test_client()
    missing = client.get(PREFIX + "/jobs/00000000-0000-0000-0000-000000000000/", headers=viewer())
    html = missing.get_data(as_text=True)
    assert missing.status_code == 404 and "the host's own" not in html and "Not found" in html


def test_a_root_mount_in_a_host_is_refused(database_url: str) -> None:
    bare = Flask("bare")
    bare.config["SQLALCHEMY_DATABASE_URI"] = database_url
    db = SQLAlchemy()
    db.init_app(bare)
    for prefix in (None, "", "/"):
        with pytest.raises(ValueError, match="url_prefix is required"):
            JobQueue(bare, db=db, url_prefix=prefix, authorize=lambda request: "viewer")
    with bare.app_context():
        db.engine.dispose()


def test_limits_are_set_in_a_mount(host: tuple[Flask, SQLAlchemy, type]) -> None:
    client = host[0].test_client()
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    limits = {"concurrency_limit": 3, "rate_limit": {"count": 10, "period_seconds": 60}}
    changed = client.patch(PREFIX + "/api/queues/mail/", json=limits, headers=operator)
    assert changed.status_code == 200, changed.get_data(as_text=True)
    assert changed.json["concurrency_limit"] == 3
    assert changed.json["rate_limit"] == {"count": 10, "period_seconds": 60}
    read = client.get(PREFIX + "/api/queues/mail/", headers={"Authorization": f"Bearer {VIEWER_TOKEN}"})
    assert read.json["concurrency_limit"] == 3


def test_the_mounted_api_s_open_reads_need_a_token_or_the_host_s_yes(
    host: tuple[Flask, SQLAlchemy, type],
) -> None:
    client = host[0].test_client()
    for path in ("/api/schema/", "/api/docs/", "/api/ready/", "/api/health/"):
        refused = client.get(PREFIX + path)
        assert refused.status_code == 401 and refused.is_json, path
        assert client.get(PREFIX + path, headers=viewer()).status_code in (200, 503), path
        token = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
        assert client.get(PREFIX + path, headers=token).status_code in (200, 503), path


def test_unknown_paths_under_the_mounted_api_answer_json(host: tuple[Flask, SQLAlchemy, type]) -> None:
    client = host[0].test_client()
    for path in ("/api/", "/api/nope/", "/api/jobs/x/y/z/"):
        missing = client.get(PREFIX + path)
        assert missing.status_code == 404 and missing.is_json, path
        assert missing.json == {"detail": "Not found."}
    wrong_method = client.delete(PREFIX + "/api/health/")
    assert wrong_method.status_code == 405 and wrong_method.is_json
    assert "GET" in wrong_method.headers["Allow"]
    redirect = client.get(PREFIX + "/api/jobs", headers={"Authorization": f"Bearer {VIEWER_TOKEN}"})
    assert redirect.status_code == 308  # the trailing-slash redirect still wins
    assert client.get("/no-such-host-page").status_code == 404
