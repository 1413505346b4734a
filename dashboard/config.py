"""Every setting, read once from the environment.

Each setting is one dataclass field whose metadata names its environment variable and its
parser (:func:`env`); the default is written once, as the field's default. The README's
Configuration table lists them. Nothing else in the project reads ``os.environ``: the app
factory builds one :class:`Settings` and everything downstream receives it
(:func:`settings_of`).

A malformed value is a start-up error naming the variable, never a silent default.
"""

from __future__ import annotations

import math
import os
import re
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any

from .roles import Role

if TYPE_CHECKING:
    from flask import Flask

DEV_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
SECRET_KEY_MIN_LENGTH = 32
TOKEN_MIN_LENGTH = 32
ROLES = tuple(role.value for role in Role)
PASSWORD_HASH_METHODS = ("scrypt:", "pbkdf2:")
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.@+-]{1,64}")
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")


class ConfigError(ValueError):
    """A setting has a value the application cannot use."""


def _bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def _number(env: Mapping[str, str], name: str, default: float, *, minimum: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value) or value < minimum:
        raise ConfigError(f"{name} must be a finite number >= {minimum:g}, got {raw!r}")
    return value


def _int(env: Mapping[str, str], name: str, default: int, *, minimum: int) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {raw!r}")
    return value


def _list(env: Mapping[str, str], name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    raw = env.get(name)
    if raw is None:
        return default
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def _str(env: Mapping[str, str], name: str, default: str) -> str:
    return env.get(name, default)


def _optional_str(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    """Blank counts as unset."""
    return (env.get(name) or "").strip() or default


def _secret(env: Mapping[str, str], name: str, default: str) -> str:
    return env.get(name) or default


def _time_zone(env: Mapping[str, str], name: str, default: str) -> str:
    time_zone = env.get(name, default).strip() or default
    try:
        zoneinfo.ZoneInfo(time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"{name} is not a known time zone: {time_zone!r}") from None
    return time_zone


def _log_level(env: Mapping[str, str], name: str, default: str) -> str:
    log_level = env.get(name, default).strip().upper() or default
    if log_level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
        raise ConfigError(f"{name} must be DEBUG, INFO, WARNING or ERROR, got {log_level!r}")
    return log_level


def env(name: str, parser: Callable[..., Any], **options: Any) -> dict[str, Any]:
    """A field's metadata: read ``name`` with ``parser(env, name, default, **options)``.

    ``default_from="other_field"`` makes the default the value read for that earlier field.
    """
    return {"env": name, "parser": parser, "options": options}


def _from_env(cls: type[Any], source: Mapping[str, str]) -> dict[str, Any]:
    """The keyword arguments of ``cls`` read from ``source``, each field by its metadata."""
    values: dict[str, Any] = {}
    for spec in fields(cls):
        meta = spec.metadata
        if "env" not in meta:
            continue
        options = dict(meta["options"])
        default_from = options.pop("default_from", None)
        if default_from is not None:
            default = values[default_from]
        elif spec.default is not MISSING:
            default = spec.default
        else:
            default = spec.default_factory()  # type: ignore[misc]
        values[spec.name] = meta["parser"](source, meta["env"], default, **options)
    return values


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


@dataclass(frozen=True)
class WorkerSettings:
    """The ``JOB_WORKER_*`` settings; ``flask worker`` options may override them."""

    threads: int = field(default=4, metadata=env("JOB_WORKER_THREADS", _int, minimum=1))
    poll_interval_ms: float = field(
        default=500.0, metadata=env("JOB_WORKER_POLL_INTERVAL_MS", _number, minimum=0)
    )
    lease_seconds: float = field(
        default=30.0, metadata=env("JOB_WORKER_LEASE_SECONDS", _number, minimum=0.01)
    )
    cleanup_interval_seconds: float = field(
        default=5.0, metadata=env("JOB_WORKER_CLEANUP_INTERVAL_SECONDS", _number, minimum=0)
    )
    cleanup_batch_size: int = field(
        default=100, metadata=env("JOB_WORKER_CLEANUP_BATCH_SIZE", _int, minimum=1)
    )
    backoff_base_seconds: float = field(
        default=5.0, metadata=env("JOB_WORKER_BACKOFF_BASE_SECONDS", _number, minimum=0)
    )
    backoff_max_seconds: float = field(
        default=300.0, metadata=env("JOB_WORKER_BACKOFF_MAX_SECONDS", _number, minimum=0)
    )
    max_attempts_default: int = field(
        default=3, metadata=env("JOB_WORKER_MAX_ATTEMPTS_DEFAULT", _int, minimum=1)
    )
    log_level: str = field(default="INFO", metadata=env("JOB_WORKER_LOG_LEVEL", _log_level))
    handler_modules: tuple[str, ...] = field(default=(), metadata=env("JOB_HANDLER_MODULES", _list))
    batch_size: int = field(default=1, metadata=env("JOB_WORKER_BATCH_SIZE", _int, minimum=1))
    listen: bool = field(default=True, metadata=env("JOB_WORKER_LISTEN", _bool))
    progress_flush_ms: float = field(
        default=250.0, metadata=env("JOB_WORKER_PROGRESS_FLUSH_MS", _number, minimum=0)
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerSettings:
        return cls(**_from_env(cls, env))

    def as_dict(self) -> dict[str, object]:
        """The settings under their environment names, as ``/api/config/`` shows them."""
        shown: dict[str, object] = {}
        for spec in fields(self):
            value = getattr(self, spec.name)
            shown[spec.metadata["env"]] = list(value) if isinstance(value, tuple) else value
        return shown


@dataclass(frozen=True)
class Settings:
    """Everything the application reads from its environment."""

    database_url: str | None = field(default=None, metadata=env("DATABASE_URL", _optional_str))
    postgres_db: str = field(default="job_queue", metadata=env("POSTGRES_DB", _str))
    postgres_user: str = field(default="postgres", metadata=env("POSTGRES_USER", _str))
    postgres_password: str = field(default="postgres", metadata=env("POSTGRES_PASSWORD", _str))
    postgres_host: str | None = field(default=None, metadata=env("POSTGRES_HOST", _optional_str))
    postgres_port: int = field(default=5432, metadata=env("POSTGRES_PORT", _int, minimum=1))
    conn_max_age: float = field(default=0.0, metadata=env("POSTGRES_CONN_MAX_AGE", _number, minimum=0))
    debug: bool = field(default=True, metadata=env("DEBUG", _bool))
    secret_key: str = field(default=DEV_SECRET_KEY, metadata=env("SECRET_KEY", _secret))
    allowed_hosts: tuple[str, ...] = field(
        default=("localhost", "127.0.0.1", "0.0.0.0"), metadata=env("ALLOWED_HOSTS", _list)
    )
    cors_allowed_origins: tuple[str, ...] = field(
        default=("http://localhost:5173", "http://127.0.0.1:5173"),
        metadata=env("CORS_ALLOWED_ORIGINS", _list),
    )
    # Unset: follows DEBUG.
    enable_debug_toolbar: bool = field(
        default=True, metadata=env("ENABLE_DEBUG_TOOLBAR", _bool, default_from="debug")
    )
    internal_ips: tuple[str, ...] = field(
        default=("127.0.0.1", "localhost", "host.docker.internal"), metadata=env("INTERNAL_IPS", _list)
    )
    time_zone: str = field(default="UTC", metadata=env("TIME_ZONE", _time_zone))
    max_content_length: int = field(default=1_048_576, metadata=env("MAX_CONTENT_LENGTH", _int, minimum=1024))
    stats_exact_below_rows: int = field(
        default=100_000, metadata=env("STATS_EXACT_BELOW_ROWS", _int, minimum=0)
    )
    stats_refresh_seconds: float = field(
        default=30.0, metadata=env("STATS_REFRESH_SECONDS", _number, minimum=0)
    )
    dashboard_query_timeout_ms: int = field(
        default=2000, metadata=env("DASHBOARD_QUERY_TIMEOUT_MS", _int, minimum=0)
    )
    auth_disabled: bool = field(default=False, metadata=env("AUTH_DISABLED", _bool))
    users: tuple[UserEntry, ...] = field(default=(), metadata=env("DASHBOARD_USERS", _users))
    api_tokens: tuple[TokenEntry, ...] = field(default=(), metadata=env("API_TOKENS", _tokens))
    session_lifetime_hours: float = field(
        default=12.0, metadata=env("SESSION_LIFETIME_HOURS", _number, minimum=0.01)
    )
    session_cookie_secure: bool = field(default=False, metadata=env("SESSION_COOKIE_SECURE", _bool))
    worker: WorkerSettings = field(default_factory=WorkerSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        source = os.environ if env is None else env
        return cls(**_from_env(cls, source), worker=WorkerSettings.from_env(source))

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
        if self.secret_key == DEV_SECRET_KEY or len(self.secret_key) < SECRET_KEY_MIN_LENGTH:
            problems.append(
                f"set SECRET_KEY to a random value of at least {SECRET_KEY_MIN_LENGTH} characters "
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
    def tz(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.time_zone)


def settings_of(app: Flask) -> Settings:
    """The :class:`Settings` the app was built with."""
    return app.extensions["jobqueue.settings"]
