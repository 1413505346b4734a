"""``flask hash-password`` and ``flask new-token`` make values the configuration accepts, and
the production refusal stops a real gunicorn."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dashboard.auth.principals import Directory
from dashboard.config import Settings

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def test_hash_password_makes_a_users_entry_that_signs_in(app):
    runner = app.test_cli_runner()
    result = runner.invoke(
        args=["hash-password", "--user", "ana", "--role", "operator", "--stdin"], input="s3cret-pass\n"
    )
    assert result.exit_code == 0, result.output
    entry = result.output.strip()
    assert entry.startswith("ana:operator:scrypt:") and "s3cret-pass" not in entry
    directory = Directory(Settings.from_env({"DASHBOARD_USERS": entry}))
    assert directory.authenticate("ana", "s3cret-pass").name == "ana"


def test_hash_password_prompts_twice_and_refuses_short_passwords(app):
    runner = app.test_cli_runner()
    prompted = runner.invoke(args=["hash-password"], input="long-enough-pw\nlong-enough-pw\n")
    assert prompted.exit_code == 0 and prompted.output.strip().splitlines()[-1].startswith("scrypt:")
    short = runner.invoke(args=["hash-password", "--stdin"], input="short\n")
    assert short.exit_code != 0 and "at least 8 characters" in short.output


def test_new_token_prints_a_token_and_an_entry_holding_only_its_digest(app):
    result = app.test_cli_runner().invoke(args=["new-token", "--name", "ci", "--role", "operator"])
    assert result.exit_code == 0
    token = result.output.split("shown once): ", 1)[1].split()[0]
    entry = result.output.split("API_TOKENS entry: ", 1)[1].strip()
    assert token not in entry and entry.startswith("ci:operator:sha256:")
    owner = Directory(Settings.from_env({"API_TOKENS": entry})).token_owner(token)
    assert owner is not None and owner.name == "ci"


@pytest.mark.process
def test_gunicorn_refuses_to_start_in_production_without_credentials(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DASHBOARD_", "API_TOKENS", "AUTH_"))}
    env.update(DEBUG="false", SECRET_KEY="", DATABASE_URL="postgresql://unused.invalid/unused")
    result = subprocess.run(
        [sys.executable, "-m", "gunicorn", "-b", "127.0.0.1:0", "wsgi:app"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "Refusing to serve with DEBUG=false" in result.stderr
    assert "SECRET_KEY" in result.stderr and "DASHBOARD_USERS" in result.stderr


@pytest.mark.parametrize(
    "args", [["new-token", "--name", "a b"], ["hash-password", "--user", "x:y", "--stdin"]]
)
def test_commands_refuse_names_the_configuration_would_refuse(app, args):
    result = app.test_cli_runner().invoke(args=args, input="long-enough-pw\n")
    assert result.exit_code == 2 and "letters, digits" in result.output
