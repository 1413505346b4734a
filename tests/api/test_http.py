"""HTTP-level rules: JSON errors under /api/ only, methods, CSRF exemption, CORS."""

from __future__ import annotations

import pytest

from .helpers import another_app


@pytest.mark.parametrize("path", ["/api/nope/", "/api/jobs/stats/extra/", "/api", "/api/"])
def test_unknown_api_paths_are_json_404(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.get_json() == {"detail": "Not found."}


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("put", "/api/jobs/", {"GET", "POST"}),
        ("delete", "/api/jobs/stats/", {"GET"}),
        ("get", "/api/jobs/00000000-0000-0000-0000-000000000000/retry/", {"POST"}),
        ("post", "/api/health/", {"GET"}),
    ],
)
def test_wrong_method_is_json_405_with_allow(client, method, path, allowed):
    response = getattr(client, method)(path)
    assert response.status_code == 405
    assert response.get_json() == {"detail": f'Method "{method.upper()}" not allowed.'}
    assert allowed <= set(response.headers["Allow"].split(", "))


def test_paths_outside_the_api_keep_flask_html_errors(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response.mimetype == "text/html"


def test_api_posts_need_no_csrf_token(app, database_url, job_type):
    with another_app(DATABASE_URL=database_url, WTF_CSRF_ENABLED=True) as strict:  # type: ignore[arg-type]
        assert strict.config["WTF_CSRF_ENABLED"] is True
        response = strict.test_client().post("/api/jobs/", json={"type": job_type})
    assert response.status_code == 201


def test_cors_allows_configured_origins_only(app, database_url):
    origin = "http://localhost:5173"
    with another_app(DATABASE_URL=database_url, CORS_ALLOWED_ORIGINS=origin) as strict:
        client = strict.test_client()
        allowed = client.get("/api/health/", headers={"Origin": origin})
        refused = client.get("/api/health/", headers={"Origin": "http://evil.example"})
        preflight = client.options(
            "/api/jobs/", headers={"Origin": origin, "Access-Control-Request-Method": "POST"}
        )
    assert allowed.headers["Access-Control-Allow-Origin"] == origin
    assert "Access-Control-Allow-Origin" not in refused.headers
    assert preflight.status_code == 200
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]


def test_cors_in_debug_reflects_localhost_origins_only(app, database_url):
    with another_app(DATABASE_URL=database_url, DEBUG="true") as debug:
        client = debug.test_client()
        local = client.get("/api/health/", headers={"Origin": "http://localhost:5173"})
        loopback = client.get("/api/health/", headers={"Origin": "http://127.0.0.1:8080"})
        foreign = client.get("/api/health/", headers={"Origin": "http://anywhere.example"})
        lookalike = client.get("/api/health/", headers={"Origin": "http://localhost.evil.example"})
    assert local.headers["Access-Control-Allow-Origin"] == "http://localhost:5173"
    assert loopback.headers["Access-Control-Allow-Origin"] == "http://127.0.0.1:8080"
    assert "Access-Control-Allow-Origin" not in foreign.headers
    assert "Access-Control-Allow-Origin" not in lookalike.headers


def test_cors_allows_no_origin_by_default_in_production(client):
    response = client.get("/api/health/", headers={"Origin": "http://localhost:5173"})
    assert "Access-Control-Allow-Origin" not in response.headers


def test_cors_headers_only_on_the_api(client):
    response = client.get("/no-such-page/", headers={"Origin": "http://localhost:5173"})
    assert "Access-Control-Allow-Origin" not in response.headers


def test_unexpected_errors_under_api_are_json_500_without_traceback(app, client, monkeypatch):
    from dashboard.store.reads import stats as read_stats

    def explode(now):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(read_stats, "stats", explode)
    response = client.get("/api/jobs/stats/")
    assert response.status_code == 500
    assert response.get_json() == {"detail": "Internal server error."}
