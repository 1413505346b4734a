"""Every setting, read once from the environment.

The names, defaults and meanings are the reference design's (Django's ``DJANGO_*`` prefix
dropped, see ``CONTRACT.md``). Nothing else in the project reads ``os.environ``: the app
factory builds one :class:`Settings` and everything downstream receives it.

A malformed value is a start-up error naming the variable, never a silent default.
"""

from __future__ import annotations

import math
import os
import re
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

DEV_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
SECRET_KEY_MIN_LENGTH = 32
SECRET_KEY_MIN_DISTINCT = 12  # distinct characters: 32 x "a" is long, not random
SECRET_KEY_MIN_BITS = 128  # estimated from its length and alphabet (see secret_key_bits)
# The origins the API answers CORS requests from in development: localhost on any port.
DEV_CORS_ORIGIN = re.compile(r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?\Z", re.IGNORECASE)
TOKEN_MIN_LENGTH = 32
ROLES = ("viewer", "operator")
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


def _list(env: Mapping[str, str], name: str, default: str) -> tuple[str, ...]:
    raw = env.get(name, default)
    return tuple(part.strip() for part in raw.split(",") if part.strip())


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


def _users(env: Mapping[str, str]) -> tuple[UserEntry, ...]:
    return tuple(UserEntry(*found) for found in _principals(env, "DASHBOARD_USERS", _check_password_hash))


def _tokens(env: Mapping[str, str]) -> tuple[TokenEntry, ...]:
    return tuple(TokenEntry(*found) for found in _principals(env, "API_TOKENS", _check_token))


@dataclass(frozen=True)
class WorkerSettings:
    """The ``JOB_WORKER_*`` settings; ``flask worker`` options may override them."""

    threads: int = 4
    poll_interval_ms: float = 500.0
    lease_seconds: float = 30.0
    cleanup_interval_seconds: float = 5.0
    cleanup_batch_size: int = 100
    backoff_base_seconds: float = 5.0
    backoff_max_seconds: float = 300.0
    max_attempts_default: int = 3
    log_level: str = "INFO"
    handler_modules: tuple[str, ...] = ()
    batch_size: int = 1
    listen: bool = True
    demo_handlers: bool = False  # register the demo.* types (JOB_DEMO_HANDLERS)
    # After SIGINT/SIGTERM, how long running handlers may take before their attempts are handed
    # back (requeued at once) and the process exits; 0 waits without limit. The default fits
    # inside the 5 s a Procfile runner (honcho) allows between SIGTERM and SIGKILL.
    shutdown_timeout_seconds: float = 3.0

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerSettings:
        log_level = env.get("JOB_WORKER_LOG_LEVEL", "INFO").strip().upper() or "INFO"
        if log_level not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
            raise ConfigError(
                f"JOB_WORKER_LOG_LEVEL must be DEBUG, INFO, WARNING or ERROR, got {log_level!r}"
            )
        settings = cls(
            threads=_int(env, "JOB_WORKER_THREADS", 4, minimum=1),
            poll_interval_ms=_number(env, "JOB_WORKER_POLL_INTERVAL_MS", 500.0, minimum=0),
            lease_seconds=_number(env, "JOB_WORKER_LEASE_SECONDS", 30.0, minimum=0.01),
            cleanup_interval_seconds=_number(env, "JOB_WORKER_CLEANUP_INTERVAL_SECONDS", 5.0, minimum=0),
            cleanup_batch_size=_int(env, "JOB_WORKER_CLEANUP_BATCH_SIZE", 100, minimum=1),
            backoff_base_seconds=_number(env, "JOB_WORKER_BACKOFF_BASE_SECONDS", 5.0, minimum=0),
            backoff_max_seconds=_number(env, "JOB_WORKER_BACKOFF_MAX_SECONDS", 300.0, minimum=0),
            max_attempts_default=_int(env, "JOB_WORKER_MAX_ATTEMPTS_DEFAULT", 3, minimum=1),
            log_level=log_level,
            handler_modules=_list(env, "JOB_HANDLER_MODULES", ""),
            batch_size=_int(env, "JOB_WORKER_BATCH_SIZE", 1, minimum=1),
            listen=_bool(env, "JOB_WORKER_LISTEN", True),
            demo_handlers=_bool(env, "JOB_DEMO_HANDLERS", _bool(env, "DEBUG", True)),
            shutdown_timeout_seconds=_number(env, "JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS", 3.0, minimum=0),
        )
        return settings

    def as_dict(self) -> dict[str, object]:
        """The settings under their environment names, as ``/api/config/`` shows them."""
        return {
            "JOB_WORKER_THREADS": self.threads,
            "JOB_WORKER_POLL_INTERVAL_MS": self.poll_interval_ms,
            "JOB_WORKER_LEASE_SECONDS": self.lease_seconds,
            "JOB_WORKER_CLEANUP_INTERVAL_SECONDS": self.cleanup_interval_seconds,
            "JOB_WORKER_CLEANUP_BATCH_SIZE": self.cleanup_batch_size,
            "JOB_WORKER_BACKOFF_BASE_SECONDS": self.backoff_base_seconds,
            "JOB_WORKER_BACKOFF_MAX_SECONDS": self.backoff_max_seconds,
            "JOB_WORKER_MAX_ATTEMPTS_DEFAULT": self.max_attempts_default,
            "JOB_WORKER_LOG_LEVEL": self.log_level,
            "JOB_HANDLER_MODULES": list(self.handler_modules),
            "JOB_WORKER_BATCH_SIZE": self.batch_size,
            "JOB_WORKER_LISTEN": self.listen,
            "JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS": self.shutdown_timeout_seconds,
        }


# --- Operations (issue 19): metrics, logs, retention, pooler --------------------------------
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "": 86400}


def parse_days(raw: str, name: str) -> float:
    """``7`` or ``7d`` (days), ``12h``, ``30m``, ``90s``, ``2w``, fractions allowed; in days.

    ``0`` keeps forever. Anything else is a :class:`ConfigError` naming ``name``.
    """
    match = _DURATION.fullmatch(raw)
    if match is None:
        raise ConfigError(f"{name} must be a duration in days (7, 0.5, 7d, 12h, 30m), got {raw!r}")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if not math.isfinite(seconds):
        raise ConfigError(f"{name} must be finite, got {raw!r}")
    return seconds / 86400


@dataclass(frozen=True)
class OpsSettings:
    """``LOG_FORMAT``, ``METRICS_TOKEN``, ``JOB_RETENTION_*``, ``JOB_WORKER_METRICS_*``,
    ``DATABASE_DIRECT_URL`` and ``DATABASE_POOLED``; every one safe when unset."""

    log_format: str = "text"
    metrics_token: str | None = field(default=None, repr=False)
    retention_succeeded_days: float = 7.0
    retention_failed_days: float = 30.0
    retention_interval_seconds: float = 60.0
    worker_metrics_port: int = 0  # 0: off
    worker_metrics_host: str = "127.0.0.1"
    database_direct_url: str | None = field(default=None, repr=False)
    database_pooled: bool = False

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OpsSettings:
        log_format = (env.get("LOG_FORMAT") or "text").strip().lower()
        if log_format not in {"text", "json"}:
            raise ConfigError(f"LOG_FORMAT must be text or json, got {log_format!r}")
        token = (env.get("METRICS_TOKEN") or "").strip() or None
        if token is not None and len(token) < TOKEN_MIN_LENGTH:
            raise ConfigError(f"METRICS_TOKEN must be at least {TOKEN_MIN_LENGTH} characters")
        direct = (env.get("DATABASE_DIRECT_URL") or "").strip() or None

        def days(name: str, default: float) -> float:
            raw = (env.get(name) or "").strip()
            return parse_days(raw, name) if raw else default

        return cls(
            log_format=log_format,
            metrics_token=token,
            retention_succeeded_days=days("JOB_RETENTION_SUCCEEDED", 7.0),
            retention_failed_days=days("JOB_RETENTION_FAILED", 30.0),
            retention_interval_seconds=_number(env, "JOB_RETENTION_INTERVAL_SECONDS", 60.0, minimum=1),
            worker_metrics_port=_int(env, "JOB_WORKER_METRICS_PORT", 0, minimum=0),
            worker_metrics_host=(env.get("JOB_WORKER_METRICS_HOST") or "").strip() or "127.0.0.1",
            database_direct_url=direct,
            database_pooled=_bool(env, "DATABASE_POOLED", direct is not None),
        )


@dataclass(frozen=True)
class Settings:
    """Everything the application reads from its environment."""

    database_url: str | None = None
    postgres_db: str = "job_queue"
    postgres_user: str = "postgres"
    postgres_password: str = "postgres"
    postgres_host: str | None = None
    postgres_port: int = 5432
    conn_max_age: float = 0.0
    debug: bool = True
    secret_key: str = DEV_SECRET_KEY
    allowed_hosts: tuple[str, ...] = ("localhost", "127.0.0.1", "0.0.0.0")
    cors_allowed_origins: tuple[str, ...] = ()
    enable_debug_toolbar: bool = True
    internal_ips: tuple[str, ...] = ("127.0.0.1", "localhost", "host.docker.internal")
    time_zone: str = "UTC"
    max_content_length: int = 1_048_576
    stats_exact_below_rows: int = 100_000
    stats_refresh_seconds: float = 30.0
    dashboard_query_timeout_ms: int = 2000
    auth_disabled: bool = False
    users: tuple[UserEntry, ...] = ()
    api_tokens: tuple[TokenEntry, ...] = ()
    session_lifetime_hours: float = 12.0
    session_cookie_secure: bool = False
    signin_max_failures_per_user: int = 5
    signin_max_failures_per_address: int = 20
    signin_window_seconds: float = 300.0
    # False: any type of 1..120 characters is accepted, as the reference says (a worker without
    # a handler fails its attempts); True: only the types registered in this process.
    job_types_strict: bool = False
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    ops: OpsSettings = field(default_factory=OpsSettings)  # issue 19

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env
        debug = _bool(env, "DEBUG", True)
        time_zone = env.get("TIME_ZONE", "UTC").strip() or "UTC"
        try:
            zoneinfo.ZoneInfo(time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ConfigError(f"TIME_ZONE is not a known time zone: {time_zone!r}") from None
        return cls(
            database_url=(env.get("DATABASE_URL") or "").strip() or None,
            postgres_db=env.get("POSTGRES_DB", "job_queue"),
            postgres_user=env.get("POSTGRES_USER", "postgres"),
            postgres_password=env.get("POSTGRES_PASSWORD", "postgres"),
            postgres_host=(env.get("POSTGRES_HOST") or "").strip() or None,
            postgres_port=_int(env, "POSTGRES_PORT", 5432, minimum=1),
            conn_max_age=_number(env, "POSTGRES_CONN_MAX_AGE", 0.0, minimum=0),
            debug=debug,
            secret_key=env.get("SECRET_KEY") or DEV_SECRET_KEY,
            allowed_hosts=_list(env, "ALLOWED_HOSTS", "localhost,127.0.0.1,0.0.0.0"),
            # No origin unless configured; in development the API reflects localhost origins.
            cors_allowed_origins=_list(env, "CORS_ALLOWED_ORIGINS", ""),
            enable_debug_toolbar=_bool(env, "ENABLE_DEBUG_TOOLBAR", debug),
            internal_ips=_list(env, "INTERNAL_IPS", "127.0.0.1,localhost,host.docker.internal"),
            time_zone=time_zone,
            max_content_length=_int(env, "MAX_CONTENT_LENGTH", 1_048_576, minimum=1024),
            stats_exact_below_rows=_int(env, "STATS_EXACT_BELOW_ROWS", 100_000, minimum=0),
            stats_refresh_seconds=_number(env, "STATS_REFRESH_SECONDS", 30.0, minimum=0),
            dashboard_query_timeout_ms=_int(env, "DASHBOARD_QUERY_TIMEOUT_MS", 2000, minimum=0),
            auth_disabled=_bool(env, "AUTH_DISABLED", False),
            users=_users(env),
            api_tokens=_tokens(env),
            session_lifetime_hours=_number(env, "SESSION_LIFETIME_HOURS", 12.0, minimum=0.01),
            session_cookie_secure=_bool(env, "SESSION_COOKIE_SECURE", False),
            signin_max_failures_per_user=_int(env, "SIGNIN_MAX_FAILURES_PER_USER", 5, minimum=1),
            signin_max_failures_per_address=_int(env, "SIGNIN_MAX_FAILURES_PER_ADDRESS", 20, minimum=1),
            signin_window_seconds=_number(env, "SIGNIN_WINDOW_SECONDS", 300.0, minimum=1),
            job_types_strict=_bool(env, "JOB_TYPES_STRICT", False),
            worker=WorkerSettings.from_env(env),
            ops=OpsSettings.from_env(env),
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
