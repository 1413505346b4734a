"""Every setting, read once from the environment.

Each setting is one dataclass field whose metadata names its environment variable and its
parser (:func:`env`, parsers in :mod:`.config_parsers`); the default is written once, as the
field's default. The operations settings (issue 19) are :class:`OpsSettings`
(:mod:`.config_ops`, ``Settings.ops``). The README's Configuration table lists them. Nothing
else in the project reads ``os.environ``: the app factory builds one :class:`Settings` and
everything downstream receives it (:func:`settings_of`).

A malformed value is a start-up error naming the variable, never a silent default.
"""

from __future__ import annotations

import math
import os
import re
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .config_ops import OpsSettings
from .config_parsers import (
    TOKEN_MIN_LENGTH,
    ConfigError,
    env,
    parse_days,
    read_bool,
    read_int,
    read_list,
    read_log_level,
    read_networks,
    read_number,
    read_optional_str,
    read_secret,
    read_str,
    read_time_zone,
    values_from_env,
)
from .limits import API_OFFSET_MAX, BIGINT_MAX
from .roles import Role

if TYPE_CHECKING:
    from flask import Flask

__all__ = ["ConfigError", "OpsSettings", "Settings", "WorkerSettings", "env", "parse_days", "settings_of"]

DEV_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
SECRET_KEY_MIN_LENGTH = 32
SECRET_KEY_MIN_DISTINCT = 12  # distinct characters: 32 x "a" is long, not random
SECRET_KEY_MIN_BITS = 128  # estimated from its length and alphabet (see secret_key_bits)
# The origins the API answers CORS requests from in development: localhost on any port.
DEV_CORS_ORIGIN = re.compile(r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?\Z", re.IGNORECASE)
ROLES = tuple(role.value for role in Role)
PASSWORD_HASH_METHODS = ("scrypt:", "pbkdf2:")
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.@+-]{1,64}")
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


def _entries(env: Mapping[str, str], name: str) -> list[tuple[str, str]]:
    """``(where, entry)`` pairs from ``name`` (comma or newline separated) and ``name_FILE``
    (one entry per line, ``#`` comments), so secrets can live in a mounted file."""
    parts = [part.strip() for part in re.split(r"[,\n]", env.get(name, "")) if part.strip()]
    found = [(f"{name} entry {number}", part) for number, part in enumerate(parts, 1)]
    path = (env.get(f"{name}_FILE") or "").strip()
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{name}_FILE cannot be read: {path!r} ({exc})") from None
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if line and not line.startswith("#"):
                found.append((f"{name}_FILE line {number}", line))
    return found


def _principal(where: str, entry: str) -> tuple[str, str, str]:
    """``name:role:secret`` split and checked; the secret is returned as given.

    Errors never quote the entry's values: with the fields in the wrong order, any of them
    may be the secret, and the message goes to the start-up log.
    """
    parts = entry.split(":", 2)
    if len(parts) != 3 or not all(parts):
        raise ConfigError(f"{where}: each entry is name:role:secret, got one with {len(parts)} part(s)")
    name, role, secret = parts
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(f"{where}: the name is not valid (letters, digits, _ . @ + -, up to 64 characters)")
    if role not in ROLES:
        raise ConfigError(f"{where}: the role (second field) must be viewer or operator")
    return name, role, secret


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


def _principals(
    env: Mapping[str, str], variable: str, check_secret: Callable[[str, str, str], None]
) -> list[tuple[str, str, str]]:
    """The ``name:role:secret`` entries of ``variable`` (and its ``_FILE``), each name once."""
    found: dict[str, tuple[str, str, str]] = {}
    for where, entry in _entries(env, variable):
        name, role, secret = _principal(where, entry)
        check_secret(where, name, secret)
        if name in found:
            raise ConfigError(f"{where}: {name!r} is listed twice")
        found[name] = (name, role, secret)
    return list(found.values())


def _check_password_hash(where: str, name: str, password_hash: str) -> None:
    if not password_hash.startswith(PASSWORD_HASH_METHODS) or password_hash.count("$") != 2:
        raise ConfigError(
            f"{where}: the password of {name!r} is not a werkzeug hash; "
            "make one with `flask --app wsgi hash-password`"
        )


def _check_token(where: str, name: str, secret: str) -> None:
    if secret.startswith("sha256:") and not _SHA256.fullmatch(secret):
        raise ConfigError(f"{where}: the digest of {name!r} must be sha256: and 64 lowercase hex digits")
    if not _SHA256.fullmatch(secret) and len(secret) < TOKEN_MIN_LENGTH:
        raise ConfigError(
            f"{where}: the token of {name!r} is shorter than {TOKEN_MIN_LENGTH} characters; "
            "make one with `flask --app wsgi new-token`"
        )


def _users(env: Mapping[str, str], name: str = "DASHBOARD_USERS", default: Any = ()) -> tuple[UserEntry, ...]:
    return tuple(UserEntry(*found) for found in _principals(env, "DASHBOARD_USERS", _check_password_hash))


def _tokens(env: Mapping[str, str], name: str = "API_TOKENS", default: Any = ()) -> tuple[TokenEntry, ...]:
    return tuple(TokenEntry(*found) for found in _principals(env, "API_TOKENS", _check_token))


def read_bool_following(env: Mapping[str, str], name: str, default: bool, *, follows: str) -> bool:
    """A boolean that, when unset, takes the value read for :class:`Settings` field ``follows``
    (``JOB_DEMO_HANDLERS`` follows ``DEBUG``, whose default stays written once, on its field)."""
    spec = next(spec for spec in fields(Settings) if spec.name == follows)
    return read_bool(env, name, spec.metadata["parser"](env, spec.metadata["env"], spec.default))


@dataclass(frozen=True)
class WorkerSettings:
    """The ``JOB_WORKER_*`` settings; ``flask worker`` options may override them."""

    threads: int = field(default=4, metadata=env("JOB_WORKER_THREADS", read_int, minimum=1))
    poll_interval_ms: float = field(
        default=500.0, metadata=env("JOB_WORKER_POLL_INTERVAL_MS", read_number, minimum=0)
    )
    lease_seconds: float = field(
        default=30.0, metadata=env("JOB_WORKER_LEASE_SECONDS", read_number, minimum=0.01)
    )
    cleanup_interval_seconds: float = field(
        default=5.0, metadata=env("JOB_WORKER_CLEANUP_INTERVAL_SECONDS", read_number, minimum=0)
    )
    cleanup_batch_size: int = field(
        default=100, metadata=env("JOB_WORKER_CLEANUP_BATCH_SIZE", read_int, minimum=1)
    )
    backoff_base_seconds: float = field(
        default=5.0, metadata=env("JOB_WORKER_BACKOFF_BASE_SECONDS", read_number, minimum=0)
    )
    backoff_max_seconds: float = field(
        default=300.0, metadata=env("JOB_WORKER_BACKOFF_MAX_SECONDS", read_number, minimum=0)
    )
    max_attempts_default: int = field(
        default=3, metadata=env("JOB_WORKER_MAX_ATTEMPTS_DEFAULT", read_int, minimum=1)
    )
    log_level: str = field(default="INFO", metadata=env("JOB_WORKER_LOG_LEVEL", read_log_level))
    handler_modules: tuple[str, ...] = field(default=(), metadata=env("JOB_HANDLER_MODULES", read_list))
    batch_size: int = field(default=1, metadata=env("JOB_WORKER_BATCH_SIZE", read_int, minimum=1))
    listen: bool = field(default=True, metadata=env("JOB_WORKER_LISTEN", read_bool))
    # Register the demo.* types; unset: follows DEBUG (on in development, off in production).
    demo_handlers: bool = field(
        default=False,
        # not in /api/config/: its job_types already say whether the demo types exist
        metadata=env("JOB_DEMO_HANDLERS", read_bool_following, follows="debug", shown=False),
    )
    # After SIGINT/SIGTERM, how long running handlers may take before their attempts are handed
    # back (requeued at once) and the process exits; 0 waits without limit. The default fits
    # inside the 5 s a Procfile runner (honcho) allows between SIGTERM and SIGKILL.
    shutdown_timeout_seconds: float = field(
        default=3.0, metadata=env("JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS", read_number, minimum=0)
    )
    # Issue 17: each worker process upserts its jobs_worker row this often (3 missed: stale).
    heartbeat_seconds: float = field(
        default=5.0, metadata=env("JOB_WORKER_HEARTBEAT_SECONDS", read_number, minimum=0.05)
    )
    # Issue 20: a handler's pending progress report is written within this long (else with its settle).
    progress_flush_ms: float = field(
        default=250.0, metadata=env("JOB_WORKER_PROGRESS_FLUSH_MS", read_number, minimum=0)
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerSettings:
        return cls(**values_from_env(cls, env))

    def as_dict(self) -> dict[str, object]:
        """The settings under their environment names, as ``/api/config/`` shows them."""
        shown: dict[str, object] = {}
        for spec in fields(self):
            if not spec.metadata["shown"]:
                continue
            value = getattr(self, spec.name)
            shown[spec.metadata["env"]] = list(value) if isinstance(value, tuple) else value
        return shown


@dataclass(frozen=True)
class Settings:
    """Everything the application reads from its environment."""

    database_url: str | None = field(default=None, metadata=env("DATABASE_URL", read_optional_str))
    postgres_db: str = field(default="job_queue", metadata=env("POSTGRES_DB", read_str))
    postgres_user: str = field(default="postgres", metadata=env("POSTGRES_USER", read_str))
    postgres_password: str = field(default="postgres", metadata=env("POSTGRES_PASSWORD", read_str))
    postgres_host: str | None = field(default=None, metadata=env("POSTGRES_HOST", read_optional_str))
    postgres_port: int = field(default=5432, metadata=env("POSTGRES_PORT", read_int, minimum=1))
    conn_max_age: float = field(default=0.0, metadata=env("POSTGRES_CONN_MAX_AGE", read_number, minimum=0))
    debug: bool = field(default=True, metadata=env("DEBUG", read_bool))
    secret_key: str = field(default=DEV_SECRET_KEY, metadata=env("SECRET_KEY", read_secret))
    allowed_hosts: tuple[str, ...] = field(
        default=("localhost", "127.0.0.1", "0.0.0.0"), metadata=env("ALLOWED_HOSTS", read_list)
    )
    cors_allowed_origins: tuple[str, ...] = field(
        # No origin unless configured; in development the API reflects localhost origins.
        default=(),
        metadata=env("CORS_ALLOWED_ORIGINS", read_list),
    )
    # Unset: follows DEBUG.
    enable_debug_toolbar: bool = field(
        default=True, metadata=env("ENABLE_DEBUG_TOOLBAR", read_bool, default_from="debug")
    )
    internal_ips: tuple[str, ...] = field(
        default=("127.0.0.1", "localhost", "host.docker.internal"), metadata=env("INTERNAL_IPS", read_list)
    )
    time_zone: str = field(default="UTC", metadata=env("TIME_ZONE", read_time_zone))
    max_content_length: int = field(
        default=1_048_576, metadata=env("MAX_CONTENT_LENGTH", read_int, minimum=1024)
    )
    stats_exact_below_rows: int = field(
        default=100_000, metadata=env("STATS_EXACT_BELOW_ROWS", read_int, minimum=0)
    )
    stats_refresh_seconds: float = field(
        default=30.0, metadata=env("STATS_REFRESH_SECONDS", read_number, minimum=0)
    )
    dashboard_query_timeout_ms: int = field(
        default=2000, metadata=env("DASHBOARD_QUERY_TIMEOUT_MS", read_int, minimum=0)
    )
    # The deepest `offset` GET /api/jobs/ serves: an offset reads every job it skips.
    api_offset_max: int = field(
        default=API_OFFSET_MAX, metadata=env("API_OFFSET_MAX", read_int, minimum=0, maximum=BIGINT_MAX)
    )
    auth_disabled: bool = field(default=False, metadata=env("AUTH_DISABLED", read_bool))
    users: tuple[UserEntry, ...] = field(default=(), metadata=env("DASHBOARD_USERS", _users))
    api_tokens: tuple[TokenEntry, ...] = field(default=(), metadata=env("API_TOKENS", _tokens))
    session_lifetime_hours: float = field(
        default=12.0, metadata=env("SESSION_LIFETIME_HOURS", read_number, minimum=0.01)
    )
    session_cookie_secure: bool = field(default=False, metadata=env("SESSION_COOKIE_SECURE", read_bool))
    signin_max_failures_per_user: int = field(
        default=5, metadata=env("SIGNIN_MAX_FAILURES_PER_USER", read_int, minimum=1)
    )
    signin_max_failures_per_address: int = field(
        default=20, metadata=env("SIGNIN_MAX_FAILURES_PER_ADDRESS", read_int, minimum=1)
    )
    signin_window_seconds: float = field(
        default=300.0, metadata=env("SIGNIN_WINDOW_SECONDS", read_number, minimum=1)
    )
    # Failures of one user name from all addresses after which each address gets one per window.
    signin_slow_after_failures_per_user: int = field(
        default=20, metadata=env("SIGNIN_SLOW_AFTER_FAILURES_PER_USER", read_int, minimum=1)
    )
    # The proxies whose X-Forwarded-For names the client (the sign-in throttle's address), the
    # same variable and default as gunicorn's trust of X-Forwarded-Proto.
    forwarded_allow_ips: tuple[str, ...] = field(
        default=("127.0.0.1", "::1"), metadata=env("FORWARDED_ALLOW_IPS", read_networks)
    )
    # False: any type of 1..TYPE_MAX_LENGTH characters is accepted (a worker without a handler
    # fails its attempts); True: only the types registered in this process.
    job_types_strict: bool = field(default=False, metadata=env("JOB_TYPES_STRICT", read_bool))
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    ops: OpsSettings = field(default_factory=OpsSettings)  # issue 19

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        source = os.environ if env is None else env
        return cls(
            **values_from_env(cls, source),
            worker=WorkerSettings.from_env(source),
            ops=OpsSettings.from_env(source),
        )

    @property
    def auth_required(self) -> bool:
        """Whether requests must carry a credential.

        Off when ``AUTH_DISABLED=true``, and in development (``DEBUG``) while no credential is
        configured; on otherwise. Configuring a user or a token in development turns it on,
        so sign-in can be tried locally.
        """
        if self.auth_disabled:
            return False
        return bool(self.users or self.api_tokens) or not self.debug

    def production_problems(self) -> list[str]:
        """What stops this configuration from serving in production (``DEBUG=false``)."""
        if self.debug:
            return []
        problems = []
        if self.secret_key == DEV_SECRET_KEY or not secret_key_is_strong(self.secret_key):
            problems.append(
                f"set SECRET_KEY to a random value of at least {SECRET_KEY_MIN_LENGTH} characters, "
                f"{SECRET_KEY_MIN_DISTINCT} of them different, about {SECRET_KEY_MIN_BITS} bits "
                "(for example the output of `python -c 'import secrets; print(secrets.token_urlsafe(48))'`)"
            )
        if not self.auth_disabled and not (self.users or self.api_tokens):
            problems.append(
                "configure at least one credential: DASHBOARD_USERS (name:role:hash, hash from "
                "`flask --app wsgi hash-password`) or API_TOKENS (name:role:token, token from "
                "`flask --app wsgi new-token`); or set AUTH_DISABLED=true to serve without sign-in "
                "on purpose"
            )
        return problems

    @property
    def has_credentials(self) -> bool:
        """Whether any dashboard user or API token is configured."""
        return bool(self.users or self.api_tokens)

    @property
    def tz(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.time_zone)


def secret_key_bits(key: str) -> float:
    """A rough entropy estimate: length times log2 of the alphabet the key's characters come
    from (digits, lower case, upper case, other printable ASCII, anything else). It catches
    long keys with little in them (``"a" * 32``: 150 bits by length, refused by distinctness;
    ``"abab..."``), not every weak key: generate keys, do not type them."""
    alphabet = 0
    if any(c.isdigit() for c in key):
        alphabet += 10
    if any("a" <= c <= "z" for c in key):
        alphabet += 26
    if any("A" <= c <= "Z" for c in key):
        alphabet += 26
    if any(c.isascii() and not c.isalnum() for c in key):
        alphabet += 33
    if any(not c.isascii() for c in key):
        alphabet += 100
    return len(key) * math.log2(alphabet) if alphabet > 1 else 0.0


def secret_key_is_strong(key: str) -> bool:
    """At least :data:`SECRET_KEY_MIN_LENGTH` characters, :data:`SECRET_KEY_MIN_DISTINCT` of
    them different, and :data:`SECRET_KEY_MIN_BITS` by :func:`secret_key_bits`."""
    return (
        len(key) >= SECRET_KEY_MIN_LENGTH
        and len(set(key)) >= SECRET_KEY_MIN_DISTINCT
        and secret_key_bits(key) >= SECRET_KEY_MIN_BITS
    )


def settings_of(app: Flask) -> Settings:
    """The :class:`Settings` the app was built with."""
    return app.extensions["jobqueue.settings"]
