"""Access settings: parsing users and tokens, when sign-in is on, and the production refusal."""

from __future__ import annotations

import pytest
from werkzeug.security import generate_password_hash

from dashboard import create_app
from dashboard.auth.credentials import configured_tokens, configured_users
from dashboard.auth.principals import Directory, Role, token_digest
from dashboard.config import DEV_SECRET_KEY, ConfigError, Settings

HASH = generate_password_hash("correct horse", method="pbkdf2:sha256:1000")
TOKEN = "t" * 40
STRONG_KEY = "Vq3r-9ZkT_w2LmX8pYb4NcH7sJd0FgUe6AoRi1"  # as secrets.token_urlsafe makes them
UNUSED_DB = "postgresql://unused.invalid/unused"  # building the app never connects


def settings(**env: str) -> Settings:
    return Settings.from_env(env)


def test_users_and_tokens_parse_from_lists_and_files(tmp_path):
    users_file = tmp_path / "users"
    users_file.write_text(f"# operators\n\nbob:viewer:{HASH}\n")
    s = settings(
        DASHBOARD_USERS=f"alice:operator:{HASH}",
        DASHBOARD_USERS_FILE=str(users_file),
        API_TOKENS=f"ci:operator:{TOKEN}\nmetrics:viewer:sha256:{'ab' * 32}",
    )
    users, tokens = configured_users(s), configured_tokens(s)
    assert [(u.name, u.role) for u in users] == [("alice", "operator"), ("bob", "viewer")]
    assert [(t.name, t.role) for t in tokens] == [("ci", "operator"), ("metrics", "viewer")]
    for shown in (repr(s), repr(users), repr(tokens)):  # secrets stay out of reprs and logs
        assert HASH not in shown and TOKEN not in shown


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"DASHBOARD_USERS": "alice:operator"}, "name:role:secret"),
        ({"DASHBOARD_USERS": f"alice:admin:{HASH}"}, "must be viewer or operator"),
        ({"DASHBOARD_USERS": "alice:operator:hunter22"}, "not a werkzeug hash"),
        ({"DASHBOARD_USERS": f"al ice:operator:{HASH}"}, "entry 1: the name is not valid"),
        ({"API_TOKENS": f"ci:operator:sha256:{'z' * 64}"}, "64 lowercase hex digits"),
        ({"DASHBOARD_USERS": f"a:viewer:{HASH},a:operator:{HASH}"}, "listed twice"),
        ({"API_TOKENS": "ci:operator:short"}, "shorter than 32"),
        ({"API_TOKENS": f"ci:operator:{TOKEN},ci:viewer:{TOKEN}x"}, "listed twice"),
        ({"API_TOKENS_FILE": "/nonexistent/tokens"}, "API_TOKENS_FILE cannot be read"),
        ({"AUTH_DISABLED": "perhaps"}, "AUTH_DISABLED must be true or false"),
    ],
)
def test_bad_access_settings_are_start_up_errors(env, message):
    with pytest.raises(ConfigError, match=message):
        Directory(settings(**env))  # the app factory builds it before anything else
    with pytest.raises(ConfigError, match=message):
        create_app({"DATABASE_URL": UNUSED_DB, "AUTO_MIGRATE": "false", **env})


def test_errors_never_quote_a_value_that_may_be_the_secret():
    for entry in (f"ci:{TOKEN}:operator", f"{TOKEN}x y:operator:ci", f"ci:operator:{TOKEN[:20]}"):
        with pytest.raises(ConfigError) as refused:
            Directory(settings(API_TOKENS=f"ok:viewer:{'o' * 40},{entry}"))
        assert "entry 2" in str(refused.value)
        assert TOKEN[:20] not in str(refused.value)


def test_unknown_names_cost_the_same_hash_check_as_known_ones():
    slow = generate_password_hash("pw", method="pbkdf2:sha256:20000")
    directory = Directory(settings(DASHBOARD_USERS=f"a:viewer:{slow},b:viewer:{slow},c:viewer:{HASH}"))
    assert directory._dummy_hash.split("$", 1)[0] == "pbkdf2:sha256:20000"
    assert Directory(settings())._dummy_hash is None  # no users: nothing to compare with


@pytest.mark.parametrize(
    ("env", "required"),
    [
        ({}, False),  # development default: no sign-in
        ({"DASHBOARD_USERS": f"a:viewer:{HASH}"}, True),  # a user configured: sign-in, even in DEBUG
        ({"API_TOKENS": f"ci:viewer:{TOKEN}"}, True),
        ({"DEBUG": "false"}, True),
        ({"DEBUG": "false", "AUTH_DISABLED": "true"}, False),
        ({"DASHBOARD_USERS": f"a:viewer:{HASH}", "AUTH_DISABLED": "true"}, False),
    ],
)
def test_when_sign_in_is_required(env, required):
    assert settings(**env).auth_required is required


def test_production_start_without_key_or_credentials_is_refused_with_what_to_set():
    with pytest.raises(ConfigError) as refused:
        create_app({"DEBUG": "false", "DATABASE_URL": UNUSED_DB})
    message = str(refused.value)
    assert "SECRET_KEY" in message and "DASHBOARD_USERS" in message and "API_TOKENS" in message
    assert "AUTH_DISABLED=true" in message and "hash-password" in message


@pytest.mark.parametrize(
    ("env", "missing"),
    [
        ({"SECRET_KEY": STRONG_KEY}, "credential"),  # key alone is not enough
        ({"SECRET_KEY": DEV_SECRET_KEY, "API_TOKENS": f"ci:viewer:{TOKEN}"}, "SECRET_KEY"),
        ({"SECRET_KEY": "short", "API_TOKENS": f"ci:viewer:{TOKEN}"}, "SECRET_KEY"),
        ({"SECRET_KEY": "short", "AUTH_DISABLED": "true"}, "SECRET_KEY"),  # CSRF still needs the key
        ({"SECRET_KEY": "a" * 32, "API_TOKENS": f"ci:viewer:{TOKEN}"}, "SECRET_KEY"),  # long, no entropy
        ({"SECRET_KEY": "ab" * 32, "API_TOKENS": f"ci:viewer:{TOKEN}"}, "SECRET_KEY"),
        ({"SECRET_KEY": "0123456789" * 4, "API_TOKENS": f"ci:viewer:{TOKEN}"}, "SECRET_KEY"),
    ],
)
def test_production_refusal_names_only_what_is_missing(env, missing):
    with pytest.raises(ConfigError, match=missing) as refused:
        create_app({"DEBUG": "false", "DATABASE_URL": UNUSED_DB, **env})
    other = "credential" if missing == "SECRET_KEY" else "SECRET_KEY"
    assert other not in str(refused.value)


@pytest.mark.parametrize(
    "env",
    [
        {"SECRET_KEY": STRONG_KEY, "API_TOKENS": f"ci:viewer:{TOKEN}"},
        {"SECRET_KEY": STRONG_KEY, "DASHBOARD_USERS": f"a:operator:{HASH}"},
        {"SECRET_KEY": STRONG_KEY, "AUTH_DISABLED": "true"},
    ],
)
def test_production_starts_with_a_key_and_a_credential_or_auth_disabled_on_purpose(env):
    app = create_app({"DEBUG": "false", "DATABASE_URL": UNUSED_DB, "AUTO_MIGRATE": "false", **env})
    assert app.config["SECRET_KEY"] == STRONG_KEY


def test_under_the_flask_command_line_the_refusal_answers_every_request(monkeypatch):
    """``flask worker`` and ``flask db upgrade`` build the app too and must still run; a
    ``flask run`` server built that way refuses every request instead of serving openly."""
    monkeypatch.setenv("FLASK_RUN_FROM_CLI", "true")
    app = create_app({"DEBUG": "false", "DATABASE_URL": UNUSED_DB, "AUTO_MIGRATE": "false"})
    for path in ("/", "/jobs/", "/api/jobs/", "/api/health/"):
        response = app.test_client().get(path)
        assert response.status_code == 503
        assert "Refusing to serve with DEBUG=false" in response.get_data(as_text=True)


def test_directory_checks_passwords_sessions_and_tokens():
    s = settings(
        DASHBOARD_USERS=f"alice:operator:{HASH}",
        API_TOKENS=f"ci:operator:{TOKEN},metrics:viewer:sha256:{token_digest('m' * 40).hex()}",
    )
    directory = Directory(s)
    alice = directory.authenticate("alice", "correct horse")
    assert alice is not None and alice.role is Role.OPERATOR
    assert directory.authenticate("alice", "wrong") is None
    assert directory.authenticate("nobody", "correct horse") is None
    assert directory.user_for_session(alice.session_id) == alice
    assert directory.user_for_session("alice:0000000000000000") is None  # another password's session
    assert directory.token_owner(TOKEN).name == "ci"
    assert directory.token_owner("m" * 40).name == "metrics"
    assert directory.token_owner(TOKEN + "x") is None
    assert directory.token_owner("") is None
