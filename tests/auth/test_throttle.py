"""The sign-in throttle: guesses bounded per user name and address, per name and per address,
shared through the database, 429 with Retry-After and no password hash computed, and no way
for an attacker to lock out a user who signs in from an address of their own."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import text

from dashboard.auth import principals
from dashboard.auth.throttle import CLEANUP_BATCH, address_bucket, client_address, parse_trusted, throttle_key
from dashboard.config import ConfigError, Settings
from dashboard.extensions import db
from tests.support.secured import PASSWORDS, build, form_token

PAIR_LIMIT = 5  # the defaults: SIGNIN_MAX_FAILURES_PER_USER (per name from one address),
ADDRESS_LIMIT = 20  # SIGNIN_MAX_FAILURES_PER_ADDRESS (distinct names from one address),
SLOW_AFTER = 20  # SIGNIN_SLOW_AFTER_FAILURES_PER_USER (a name's failures from everywhere)


def attempt(
    client: FlaskClient, name: str, password: str, address: str = "10.0.0.1", forwarded_for: str | None = None
) -> Any:
    environ = {"REMOTE_ADDR": address}
    token = form_token(client)
    data = {"csrf_token": token, "username": name, "password": password}
    headers = {"X-Forwarded-For": forwarded_for} if forwarded_for else {}
    return client.post("/login/", data=data, environ_base=environ, headers=headers)


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


def test_guesses_from_one_address_are_refused_there_and_lift_after_the_window(secured_app, hash_checks):
    client = secured_app.test_client()
    for _ in range(PAIR_LIMIT):
        assert attempt(client, "olga", "wrong", address="10.6.6.6").status_code == 400
    assert len(hash_checks) == PAIR_LIMIT

    refused = attempt(client, "olga", PASSWORDS["olga"], address="10.6.6.6")
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["Retry-After"]) <= 300
    assert "Too many failed sign-ins" in refused.get_data(as_text=True)
    assert len(hash_checks) == PAIR_LIMIT  # the 429 computed no hash
    assert "session" not in refused.headers.get("Set-Cookie", "")

    age_failures(secured_app, 301)  # the window (300 s) has passed
    other = secured_app.test_client()
    assert attempt(other, "olga", PASSWORDS["olga"], address="10.6.6.6").status_code == 303
    assert other.get("/").status_code == 200


def test_an_attacker_cannot_lock_a_user_out(secured_app, hash_checks):
    """Wrong passwords for a name from one address, however many, leave the user's own
    address alone: the right password from there is checked and signs in."""
    attacker = secured_app.test_client()
    for _ in range(3 * PAIR_LIMIT):  # a slow, patient guesser: one a minute for ever
        attempt(attacker, "olga", "wrong", address="10.6.6.6")
    assert len(hash_checks) == PAIR_LIMIT

    user = secured_app.test_client()
    assert attempt(user, "olga", PASSWORDS["olga"], address="10.0.0.7").status_code == 303
    assert user.get("/").status_code == 200


def test_many_addresses_at_one_name_slow_to_one_guess_each(secured_app, hash_checks):
    """Once a name has SLOW_AFTER failures from everywhere, each address gets one guess at it
    per window; an address that has not failed for it is still checked."""
    client = secured_app.test_client()
    for n in range(SLOW_AFTER // PAIR_LIMIT):
        for _ in range(PAIR_LIMIT):
            assert attempt(client, "olga", "wrong", address=f"10.0.1.{n}").status_code == 400
    assert attempt(client, "olga", "wrong", address="10.0.3.1").status_code == 400  # a fresh one: checked
    checked = len(hash_checks)
    again = attempt(client, "olga", "wrong", address="10.0.3.1")  # its second: refused
    assert again.status_code == 429 and len(hash_checks) == checked

    assert (
        attempt(secured_app.test_client(), "olga", PASSWORDS["olga"], address="10.0.0.8").status_code == 303
    )
    assert attempt(client, "vera", PASSWORDS["vera"], address="10.0.3.1").status_code == 303  # another name


def test_an_address_spraying_names_is_refused_new_names_only(secured_app, hash_checks):
    client = secured_app.test_client()
    for n in range(ADDRESS_LIMIT):  # a different (unknown) name each time
        assert attempt(client, f"guess{n}", "wrong", address="10.9.9.9").status_code == 400
    checked = len(hash_checks)

    refused = attempt(client, "vera", PASSWORDS["vera"], address="10.9.9.9")
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
    assert len(hash_checks) == checked
    # a name it already failed keeps its own allowance
    assert attempt(client, "guess0", "wrong", address="10.9.9.9").status_code == 400

    # The same user from another address signs in: only the spraying address is refused.
    elsewhere = secured_app.test_client()
    assert attempt(elsewhere, "vera", PASSWORDS["vera"], address="10.8.8.8").status_code == 303


def test_behind_a_trusted_proxy_each_client_counts_under_its_own_address(secured_app, hash_checks):
    """Every request comes from the proxy (127.0.0.1, trusted by default, as gunicorn trusts
    it): the clients are told apart by the address it appends to X-Forwarded-For."""
    proxy = "127.0.0.1"
    attacker = secured_app.test_client()
    for n in range(ADDRESS_LIMIT):
        attempt(attacker, f"guess{n}", "wrong", address=proxy, forwarded_for="203.0.113.66")
    for _ in range(PAIR_LIMIT):
        attempt(attacker, "olga", "wrong", address=proxy, forwarded_for="203.0.113.66")
    # what the attacker writes before the proxy's entry changes nothing
    forged = attempt(attacker, "olga", "wrong", address=proxy, forwarded_for="198.51.100.7, 203.0.113.66")
    assert forged.status_code == 429

    user = secured_app.test_client()
    assert (
        attempt(user, "olga", PASSWORDS["olga"], address=proxy, forwarded_for="198.51.100.7").status_code
        == 303
    )


def test_an_untrusted_peer_counts_under_its_own_address_whatever_it_forwards(secured_app):
    client = secured_app.test_client()
    for n in range(PAIR_LIMIT):
        attempt(client, "olga", "wrong", address="10.0.0.5", forwarded_for=f"192.0.2.{n}")
    assert attempt(client, "olga", "wrong", address="10.0.0.5", forwarded_for="192.0.2.99").status_code == 429


def test_ipv6_addresses_count_per_64(secured_app):
    client = secured_app.test_client()
    for n in range(PAIR_LIMIT):
        assert attempt(client, "olga", "wrong", address=f"2001:db8:0:1::{n + 1}").status_code == 400
    assert attempt(client, "olga", "wrong", address="2001:db8:0:1::99").status_code == 429
    assert attempt(client, "olga", "wrong", address="2001:db8:0:2::1").status_code == 400


def _parallel(app: Flask, attempts: list[tuple[str, str]], hash_checks: list[str]) -> list[int]:
    """Send ``attempts`` ((name, address) with a wrong password) at once, each hash check
    taking as long as a real scrypt (tens of milliseconds)."""
    clients = [app.test_client() for _ in attempts]
    tokens = [form_token(client) for client in clients]
    start = threading.Barrier(len(attempts))

    def post(i: int) -> int:
        name, address = attempts[i]
        start.wait()
        data = {"csrf_token": tokens[i], "username": name, "password": "wrong"}
        return clients[i].post("/login/", data=data, environ_base={"REMOTE_ADDR": address}).status_code

    with ThreadPoolExecutor(len(attempts)) as pool:
        return list(pool.map(post, range(len(attempts))))


@pytest.fixture
def slow_hash_checks(monkeypatch: pytest.MonkeyPatch, hash_checks: list[str]) -> list[str]:
    original = principals.check_password_hash

    def slow(pwhash: str, password: str) -> bool:
        time.sleep(0.05)
        return original(pwhash, password)

    monkeypatch.setattr(principals, "check_password_hash", slow)
    return hash_checks


def test_parallel_attempts_at_one_name_check_no_more_passwords_than_the_limit(secured_app, slow_hash_checks):
    statuses = _parallel(secured_app, [("olga", "10.7.7.7")] * 32, slow_hash_checks)
    assert len(slow_hash_checks) <= PAIR_LIMIT
    assert statuses.count(400) == len(slow_hash_checks) and statuses.count(429) == 32 - len(slow_hash_checks)


def test_parallel_attempts_at_many_names_check_no_more_than_the_address_limit(secured_app, slow_hash_checks):
    statuses = _parallel(secured_app, [(f"spray{n}", "10.7.7.8") for n in range(32)], slow_hash_checks)
    assert len(slow_hash_checks) <= ADDRESS_LIMIT
    assert statuses.count(429) == 32 - len(slow_hash_checks)


def test_throttle_is_shared_between_processes_through_the_database(secured_app, database_url):
    """Two app instances (as two gunicorn workers) see the same failures."""
    for _ in range(PAIR_LIMIT):
        assert attempt(secured_app.test_client(), "olga", "wrong").status_code == 400
    with build(database_url) as second_worker:
        refused = attempt(second_worker.test_client(), "olga", PASSWORDS["olga"])
    assert refused.status_code == 429


def test_limits_are_settings(secured_app, database_url):
    with build(
        database_url, SIGNIN_MAX_FAILURES_PER_USER="1", SIGNIN_SLOW_AFTER_FAILURES_PER_USER="2"
    ) as strict:
        client = strict.test_client()
        assert attempt(client, "vera", "wrong").status_code == 400
        assert attempt(client, "vera", PASSWORDS["vera"]).status_code == 429
        assert attempt(client, "vera", "wrong", address="10.0.0.2").status_code == 400


def test_success_clears_that_addresses_failures_only(secured_app):
    client = secured_app.test_client()
    for _ in range(PAIR_LIMIT):
        attempt(client, "olga", "wrong", address="10.0.0.9")
    for _ in range(PAIR_LIMIT - 1):
        attempt(client, "olga", "wrong")
    assert attempt(client, "olga", PASSWORDS["olga"]).status_code == 303
    for _ in range(PAIR_LIMIT):  # a fresh allowance after the success, from that address
        assert attempt(secured_app.test_client(), "olga", "wrong").status_code == 400
    assert attempt(secured_app.test_client(), "olga", "wrong", address="10.0.0.9").status_code == 429


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
        rows = conn.execute(text("SELECT key, address FROM auth_signin_failure WHERE key <> 'old'")).all()
        old = conn.execute(text("SELECT count(*) FROM auth_signin_failure WHERE key = 'old'")).scalar()
    assert [tuple(row) for row in rows] == [
        (throttle_key("user", "typed-secret-name"), throttle_key("address", "10.0.0.1"))
    ]
    assert old == 50  # one batch deleted per recorded failure
    attempt(secured_app.test_client(), "another", "wrong")
    with secured_app.app_context(), db.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM auth_signin_failure WHERE key = 'old'")).scalar() == 0


def test_client_address_rules():
    trusted = parse_trusted("127.0.0.1,::1,10.1.0.0/16")
    assert client_address("10.1.2.3", "198.51.100.7", trusted) == "198.51.100.7"
    assert client_address("10.1.2.3", "evil, 198.51.100.7 ", trusted) == "198.51.100.7"
    assert client_address("10.2.0.1", "198.51.100.7", trusted) == "10.2.0.1"
    assert client_address("", "198.51.100.7", trusted) == "198.51.100.7"  # a Unix socket: the proxy's
    assert client_address("10.2.0.1", "198.51.100.7", parse_trusted("*")) == "198.51.100.7"
    assert client_address("10.1.2.3", None, trusted) == "10.1.2.3"
    assert address_bucket("2001:db8:1:2:3:4:5:6") == "2001:db8:1:2::/64"
    assert address_bucket("::ffff:192.0.2.1") == "192.0.2.1"


def test_forwarded_allow_ips_is_checked_at_start():
    assert Settings.from_env({"FORWARDED_ALLOW_IPS": "10.0.0.0/8, 192.0.2.1"}).forwarded_allow_ips == (
        "10.0.0.0/8",
        "192.0.2.1",
    )
    with pytest.raises(ConfigError, match="FORWARDED_ALLOW_IPS"):
        Settings.from_env({"FORWARDED_ALLOW_IPS": "proxy.internal"})
