"""The sign-in throttle: per user name and per client address, shared through the database,
429 with Retry-After and no password hash computed, lifted once the window has passed."""

from __future__ import annotations

from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import text

from dashboard.auth import principals
from dashboard.auth.throttle import CLEANUP_BATCH, throttle_key
from dashboard.extensions import db

from .secured import PASSWORDS, build, form_token

USER_LIMIT = 5  # the defaults: SIGNIN_MAX_FAILURES_PER_USER, ..._PER_ADDRESS
ADDRESS_LIMIT = 20


def attempt(client: FlaskClient, name: str, password: str, address: str = "10.0.0.1") -> Any:
    environ = {"REMOTE_ADDR": address}
    token = form_token(client)
    data = {"csrf_token": token, "username": name, "password": password}
    return client.post("/login/", data=data, environ_base=environ)


@pytest.fixture
def hash_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every password hash the sign-in computes (a wrapper around werkzeug's check)."""
    calls: list[str] = []
    original = principals.check_password_hash

    def counting(pwhash: str, password: str) -> bool:
        calls.append(pwhash)
        return original(pwhash, password)

    monkeypatch.setattr(principals, "check_password_hash", counting)
    return calls


def age_failures(app: Flask, seconds: float) -> None:
    """Move every recorded failure ``seconds`` into the past (the window passing, no sleep)."""
    with app.app_context(), db.engine.begin() as conn:
        conn.execute(
            text("UPDATE auth_signin_failure SET created_at = created_at - make_interval(secs => :s)"),
            {"s": seconds},
        )


def test_per_user_name_throttle_answers_429_without_hashing_then_lifts(secured_app, hash_checks):
    client = secured_app.test_client()
    for n in range(USER_LIMIT):  # from different addresses: only the user name's count applies
        assert attempt(client, "olga", "wrong", address=f"10.0.1.{n}").status_code == 400
    assert len(hash_checks) == USER_LIMIT

    refused = attempt(client, "olga", PASSWORDS["olga"], address="10.0.2.1")
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 300
    assert "Too many failed sign-ins" in refused.get_data(as_text=True)
    assert len(hash_checks) == USER_LIMIT  # the 429 computed no hash
    assert "session" not in refused.headers.get("Set-Cookie", "")

    # Another user from the same addresses is not affected.
    assert attempt(client, "vera", PASSWORDS["vera"], address="10.0.1.0").status_code == 303

    age_failures(secured_app, 301)  # the window (300 s) has passed
    other = secured_app.test_client()
    assert attempt(other, "olga", PASSWORDS["olga"], address="10.0.2.1").status_code == 303
    assert other.get("/").status_code == 200


def test_per_address_throttle_covers_every_user_name_from_that_address(secured_app, hash_checks):
    client = secured_app.test_client()
    for n in range(ADDRESS_LIMIT):  # a different (unknown) name each time
        assert attempt(client, f"guess{n}", "wrong", address="10.9.9.9").status_code == 400
    checked = len(hash_checks)

    refused = attempt(client, "vera", PASSWORDS["vera"], address="10.9.9.9")
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert len(hash_checks) == checked

    # The same user from another address signs in: only the address is throttled.
    elsewhere = secured_app.test_client()
    assert attempt(elsewhere, "vera", PASSWORDS["vera"], address="10.8.8.8").status_code == 303


def test_throttle_is_shared_between_processes_through_the_database(secured_app, database_url):
    """Two app instances (as two gunicorn workers) see the same failures."""
    for _ in range(USER_LIMIT):
        assert attempt(secured_app.test_client(), "olga", "wrong").status_code == 400
    with build(database_url) as second_worker:
        refused = attempt(second_worker.test_client(), "olga", PASSWORDS["olga"], address="10.3.3.3")
    assert refused.status_code == 429


def test_limits_are_settings(secured_app, database_url):
    with build(database_url, SIGNIN_MAX_FAILURES_PER_USER="1") as strict:
        client = strict.test_client()
        assert attempt(client, "vera", "wrong").status_code == 400
        assert attempt(client, "vera", PASSWORDS["vera"]).status_code == 429


def test_success_clears_the_user_names_failures(secured_app):
    client = secured_app.test_client()
    for _ in range(USER_LIMIT - 1):
        attempt(client, "olga", "wrong")
    assert attempt(client, "olga", PASSWORDS["olga"]).status_code == 303
    for _ in range(USER_LIMIT - 1):  # a fresh allowance after the success
        assert attempt(secured_app.test_client(), "olga", "wrong").status_code == 400


def test_stored_keys_are_digests_and_old_rows_are_cleaned_up_in_bounded_batches(secured_app):
    with secured_app.app_context(), db.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO auth_signin_failure (key, created_at) "
                "SELECT 'old', now() - interval '1 day' FROM generate_series(1, :n)"
            ),
            {"n": CLEANUP_BATCH + 50},
        )
    attempt(secured_app.test_client(), "typed-secret-name", "wrong")
    with secured_app.app_context(), db.engine.connect() as conn:
        keys = conn.execute(text("SELECT key FROM auth_signin_failure WHERE key <> 'old'")).scalars().all()
        old = conn.execute(text("SELECT count(*) FROM auth_signin_failure WHERE key = 'old'")).scalar()
    assert sorted(keys) == sorted(
        [throttle_key("user", "typed-secret-name"), throttle_key("address", "10.0.0.1")]
    )
    assert not any("typed-secret-name" in key for key in keys)
    assert old == 50  # one batch deleted per recorded failure
    attempt(secured_app.test_client(), "another", "wrong")
    with secured_app.app_context(), db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM auth_signin_failure WHERE key = 'old'")).scalar() == 0
