"""Who may do what: roles, configured users and API tokens, and the actor an action is
recorded under.

This module knows nothing about HTTP. Users and tokens come from configuration
(``credentials.py`` parses them from the settings), not from the queue's schema: the job
tables know nothing of users, and access is an operator's setting like any other. Passwords
are kept only as werkzeug hashes; tokens only as SHA-256 digests, compared in constant time.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import secrets
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from werkzeug.security import check_password_hash, generate_password_hash

from ..config import Settings
from ..roles import Role  # defined below the settings and auth, which both name roles
from .credentials import configured_tokens, configured_users


@dataclass(frozen=True)
class Actor:
    """Who did something and with which credential; recorded in the events of their actions."""

    name: str
    role: Role | None
    credential: str  # "password", "token", or "none" when sign-in is off

    def event_data(self, source: str, **request: str) -> dict[str, Any]:
        """The audit fields of an event: the door (``source``), the actor and their role, then
        what the door knows of the request (``request_id=``, from ``ops.logs``)."""
        return {
            "source": source,
            "actor": self.name,
            "role": self.role,
            "credential": self.credential,
            **request,
        }

    def may(self, needed: Role) -> bool:
        return self.role is None or self.role.allows(needed)


# The actor of every action while sign-in is off (development, or AUTH_DISABLED=true).
ANONYMOUS = Actor("anonymous", None, "none")


def command_line_actor() -> str:
    """Who acts from the command line: ``cli:`` and the operating-system user (``cli`` for a
    uid without a name)."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):  # no user name for this uid
        return "cli"


@dataclass(frozen=True)
class User:
    """A dashboard user, as Flask-Login wants one.

    The session id carries a fingerprint of the password hash, so changing a user's password
    in the configuration signs out every session made with the old one.
    """

    name: str
    role: Role
    password_hash: str = field(repr=False)

    is_authenticated = True
    is_active = True
    is_anonymous = False

    @property
    def session_id(self) -> str:
        fingerprint = hashlib.sha256(self.password_hash.encode()).hexdigest()[:16]
        return f"{self.name}:{fingerprint}"

    def get_id(self) -> str:
        return self.session_id

    @property
    def actor(self) -> Actor:
        return Actor(self.name, self.role, "password")


@dataclass(frozen=True)
class ApiToken:
    name: str
    role: Role
    digest: bytes = field(repr=False)

    @property
    def actor(self) -> Actor:
        return Actor(self.name, self.role, "token")


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def hash_password(password: str) -> str:
    """A werkzeug password hash (scrypt), the form ``DASHBOARD_USERS`` takes."""
    return generate_password_hash(password)


def new_token() -> str:
    """A random API token: 256 bits, URL-safe."""
    return secrets.token_urlsafe(32)


class Directory:
    """The configured users and tokens, looked up without leaking which part was wrong.

    Built from the settings' entries, parsed and checked (``credentials.py``): a malformed
    entry raises ``ConfigError`` here, which is why the app factory builds it first.
    """

    def __init__(self, settings: Settings) -> None:
        self.users = {u.name: User(u.name, Role(u.role), u.password_hash) for u in configured_users(settings)}
        self.tokens = tuple(
            ApiToken(
                t.name,
                Role(t.role),
                bytes.fromhex(t.secret[7:]) if t.secret.startswith("sha256:") else token_digest(t.secret),
            )
            for t in configured_tokens(settings)
        )
        self._dummy_hash = self._make_dummy_hash()

    def _make_dummy_hash(self) -> str | None:
        """A hash of a random password made with the users' own method and cost (the most
        common one), so checking an unknown name takes as long as checking a known one."""
        methods = Counter(user.password_hash.split("$", 1)[0] for user in self.users.values())
        if not methods:
            return None
        return generate_password_hash(secrets.token_hex(16), method=methods.most_common(1)[0][0])

    def authenticate(self, name: str, password: str) -> User | None:
        """The user if ``password`` is theirs. An unknown name costs the same hash check, so
        response time does not tell which names exist."""
        user = self.users.get(name)
        if user is None:
            if self._dummy_hash is not None:
                check_password_hash(self._dummy_hash, password)
            return None
        return user if check_password_hash(user.password_hash, password) else None

    def user_for_session(self, session_id: str) -> User | None:
        """The user a session id names, if they still exist with the same password."""
        name = session_id.split(":", 1)[0]
        user = self.users.get(name)
        if user is None or not hmac.compare_digest(user.session_id, session_id):
            return None
        return user

    def token_owner(self, presented: str) -> ApiToken | None:
        """The token matching ``presented``. Every configured digest is compared, in constant
        time, whatever matches first."""
        digest = token_digest(presented)
        found = None
        for token in self.tokens:
            if hmac.compare_digest(token.digest, digest):
                found = token
        return found
