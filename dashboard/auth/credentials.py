"""The configured credentials, parsed and checked: dashboard users and API tokens.

The settings read ``DASHBOARD_USERS`` and ``API_TOKENS`` (and their ``_FILE``) as entries
(``Settings.user_entries``, ``Settings.token_entries``); this module says what an entry is:
``name:role:secret``, the name unique, the role ``viewer`` or ``operator``, and the secret a
werkzeug password hash (users) or a token of at least 32 characters or its ``sha256:``
digest (tokens). A malformed entry is a :class:`~dashboard.config.ConfigError` naming where
it is (``DASHBOARD_USERS entry 2``, ``API_TOKENS_FILE line 7``) and never quoting it: with
the fields in the wrong order, any of them may be the secret, and the message goes to the
start-up log. The app factory parses them before anything else (``Directory``), so a
malformed entry stops the start.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import ConfigError, Entry, Settings
from ..config.parsers import TOKEN_MIN_LENGTH
from ..roles import ROLES

PASSWORD_HASH_METHODS = ("scrypt:", "pbkdf2:")
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.@+-]{1,64}")
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class UserEntry:
    """A dashboard user: a name, a role and a password hash (never the password)."""

    name: str
    role: str
    password_hash: str = field(repr=False)


@dataclass(frozen=True)
class TokenEntry:
    """An API token: a name (for the audit trail), a role, and the token or its SHA-256."""

    name: str
    role: str
    secret: str = field(repr=False)  # the token itself, or "sha256:<hex>" of it


def _principal(entry: Entry) -> tuple[str, str, str]:
    """``name:role:secret`` split and checked; the secret is returned as given."""
    where = entry.where
    parts = entry.text.split(":", 2)
    if len(parts) != 3 or not all(parts):
        raise ConfigError(f"{where}: each entry is name:role:secret, got one with {len(parts)} part(s)")
    name, role, secret = parts
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"{where}: the name is not valid (letters, digits, _ . @ + -, up to 64 characters)")
    if role not in ROLES:
        raise ConfigError(f"{where}: the role (second field) must be viewer or operator")
    return name, role, secret


def _principals(
    entries: tuple[Entry, ...], check_secret: Callable[[str, str, str], None]
) -> list[tuple[str, str, str]]:
    """The ``name:role:secret`` of each entry, each name once."""
    found: dict[str, tuple[str, str, str]] = {}
    for entry in entries:
        name, role, secret = _principal(entry)
        check_secret(entry.where, name, secret)
        if name in found:
            raise ConfigError(f"{entry.where}: {name!r} is listed twice")
        found[name] = (name, role, secret)
    return list(found.values())


def check_password_hash_format(where: str, name: str, password_hash: str) -> None:
    """A werkzeug hash (``scrypt:`` or ``pbkdf2:``, three ``$``-separated parts), or an error."""
    if not password_hash.startswith(PASSWORD_HASH_METHODS) or password_hash.count("$") != 2:
        raise ConfigError(
            f"{where}: the password of {name!r} is not a werkzeug hash; "
            "make one with `flask --app wsgi hash-password`"
        )


def check_token(where: str, name: str, secret: str) -> None:
    """A token of at least :data:`TOKEN_MIN_LENGTH` characters, or ``sha256:`` and 64
    lowercase hex digits, or an error."""
    if secret.startswith("sha256:") and not _SHA256.fullmatch(secret):
        raise ConfigError(f"{where}: the digest of {name!r} must be sha256: and 64 lowercase hex digits")
    if not _SHA256.fullmatch(secret) and len(secret) < TOKEN_MIN_LENGTH:
        raise ConfigError(
            f"{where}: the token of {name!r} is shorter than {TOKEN_MIN_LENGTH} characters; "
            "make one with `flask --app wsgi new-token`"
        )


def configured_users(settings: Settings) -> tuple[UserEntry, ...]:
    """The configured dashboard users (``DASHBOARD_USERS`` and its file), checked."""
    found = _principals(settings.user_entries, check_password_hash_format)
    return tuple(UserEntry(*user) for user in found)


def configured_tokens(settings: Settings) -> tuple[TokenEntry, ...]:
    """The configured API tokens (``API_TOKENS`` and its file), checked."""
    return tuple(TokenEntry(*found) for found in _principals(settings.token_entries, check_token))
