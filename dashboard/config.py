"""Every setting, read once from the environment.

Each setting is one dataclass field whose metadata names its environment variable and its
parser (:func:`env`, parsers in :mod:`.config_parsers`); the default is written once, as the
field's default. The operations settings are :class:`OpsSettings` (:mod:`.config_ops`,
``Settings.ops``). The documentation's configuration page is generated from the fields'
metadata (``python -m scripts.docs``). Nothing else in the project reads ``os.environ``: the
app factory builds one :class:`Settings` and everything downstream receives it
(:func:`settings_of`).

A malformed value is a start-up error naming the variable, never a silent default. The
credentials (``DASHBOARD_USERS``, ``API_TOKENS`` and their ``_FILE``) are read here as entries
and parsed by ``auth/credentials.py``, which knows what a user and a token are; the app
factory parses them before anything else, so a malformed one stops the start too. This module
imports nothing of ``auth``: everything reads the settings, so they sit below every package.
"""

from __future__ import annotations

import math
import os
import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from .config_ops import OpsSettings
from .config_parsers import (
    ConfigError,
    Entry,
    env,
    parse_days,
    read_bool,
    read_entries,
    read_int,
    read_list,
    read_log_level,
    read_networks,
    read_number,
    read_optional_bool,
    read_optional_str,
    read_processes,
    read_queues,
    read_secret,
    read_str,
    read_time_zone,
    values_from_env,
)
from .limits import API_OFFSET_MAX, BIGINT_MAX
from .mount import EXTENSION

if TYPE_CHECKING:
    from flask import Flask

__all__ = ["ConfigError", "OpsSettings", "Settings", "WorkerSettings", "env", "parse_days", "settings_of"]

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEV_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
SECRET_KEY_MIN_LENGTH = 32
SECRET_KEY_MIN_DISTINCT = 12  # distinct characters: 32 x "a" is long, not random
SECRET_KEY_MIN_BITS = 128  # estimated from its length and alphabet (see secret_key_bits)
# The origins the API answers CORS requests from in development: localhost on any port.
DEV_CORS_ORIGIN = re.compile(r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?\Z", re.IGNORECASE)


def read_bool_following(env: Mapping[str, str], name: str, default: bool, *, follows: str) -> bool:
    """A boolean that, when unset, takes the value read for :class:`Settings` field ``follows``
    (``JOB_DEMO_HANDLERS`` follows ``DEBUG``, whose default stays written once, on its field)."""
    spec = next(spec for spec in fields(Settings) if spec.name == follows)
    return read_bool(env, name, spec.metadata["parser"](env, spec.metadata["env"], spec.default))


@dataclass(frozen=True)
class WorkerSettings:
    """The ``JOB_WORKER_*`` settings; ``flask worker`` options may override them."""

    threads: int = field(
        default=4, metadata=env("JOB_WORKER_THREADS", read_int, minimum=1, option="Worker threads")
    )
    # More than 1: a supervisor and this many worker processes (runtime/supervisor.py).
    processes: int = field(
        default=1,
        metadata=env(
            "JOB_WORKER_PROCESSES",
            read_processes,
            option="Worker processes, each with its own threads (auto: one per CPU); more than 1 "
            "starts a supervisor",
        ),
    )
    poll_interval_ms: float = field(
        default=500.0,
        metadata=env(
            "JOB_WORKER_POLL_INTERVAL_MS", read_number, minimum=0, option="Sleep when nothing is claimable"
        ),
    )
    lease_seconds: float = field(
        default=30.0,
        metadata=env(
            "JOB_WORKER_LEASE_SECONDS", read_number, minimum=0.01, option="Lease of a running attempt"
        ),
    )
    cleanup_interval_seconds: float = field(
        default=5.0,
        metadata=env(
            "JOB_WORKER_CLEANUP_INTERVAL_SECONDS",
            read_number,
            minimum=0,
            option="How often each thread rescues expired leases",
        ),
    )
    cleanup_batch_size: int = field(
        default=100,
        metadata=env(
            "JOB_WORKER_CLEANUP_BATCH_SIZE",
            read_int,
            minimum=1,
            option="Expired leases rescued per pass at most",
        ),
    )
    backoff_base_seconds: float = field(
        default=5.0,
        metadata=env(
            "JOB_WORKER_BACKOFF_BASE_SECONDS",
            read_number,
            minimum=0,
            option="Retry delay after the first failed attempt",
        ),
    )
    backoff_max_seconds: float = field(
        default=300.0,
        metadata=env("JOB_WORKER_BACKOFF_MAX_SECONDS", read_number, minimum=0, option="Longest retry delay"),
    )
    max_attempts_default: int = field(
        default=3, metadata=env("JOB_WORKER_MAX_ATTEMPTS_DEFAULT", read_int, minimum=1)
    )
    log_level: str = field(
        default="INFO",
        metadata=env(
            "JOB_WORKER_LOG_LEVEL", read_log_level, option="DEBUG logs every poll, claim and execution"
        ),
    )
    handler_modules: tuple[str, ...] = field(default=(), metadata=env("JOB_HANDLER_MODULES", read_list))
    batch_size: int = field(
        default=1,
        metadata=env(
            "JOB_WORKER_BATCH_SIZE",
            read_int,
            minimum=1,
            option="Jobs claimed in one statement; at most twice this many held claimed ahead of the "
            "threads; 1 claims per thread",
        ),
    )
    listen: bool = field(
        default=True,
        metadata=env(
            "JOB_WORKER_LISTEN",
            read_bool,
            option="Wake idle threads on NOTIFY instead of waiting for the next poll",
        ),
    )
    schedules: bool = field(
        default=True,
        metadata=env(
            "JOB_WORKER_SCHEDULES",
            read_bool,
            option="Fire due schedules (recurring jobs); --no-schedules opts this worker out",
        ),
    )
    # The named queues this worker claims from; unset (or blank): every queue, including ones
    # that first appear later.
    queues: tuple[str, ...] | None = field(
        default=None,
        metadata=env(
            "JOB_WORKER_QUEUES",
            read_queues,
            option="Queues to claim from, comma separated (unset: every queue)",
        ),
    )
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
    # Each worker process upserts its jobs_worker row this often (3 missed: stale).
    heartbeat_seconds: float = field(
        default=5.0, metadata=env("JOB_WORKER_HEARTBEAT_SECONDS", read_number, minimum=0.05)
    )
    # A handler's pending progress report is written within this long (else with its settle).
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
    # The credentials as configured, each entry unparsed (auth/credentials.py parses them).
    user_entries: tuple[Entry, ...] = field(default=(), metadata=env("DASHBOARD_USERS", read_entries))
    token_entries: tuple[Entry, ...] = field(default=(), metadata=env("API_TOKENS", read_entries))
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
    # The Flask instance folder (the embedded database's data lives in it).
    instance_path: str = field(
        default=os.path.join(PROJECT_ROOT, "instance"), metadata=env("INSTANCE_PATH", read_optional_str)
    )
    # Apply migrations at start; unset: on for the embedded database only (migrates_at_start).
    auto_migrate: bool | None = field(default=None, metadata=env("AUTO_MIGRATE", read_optional_bool))
    worker: WorkerSettings = field(default_factory=WorkerSettings)
    ops: OpsSettings = field(default_factory=OpsSettings)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        source = os.environ if env is None else env
        return cls(
            **values_from_env(cls, source),
            worker=WorkerSettings.from_env(source),
            ops=OpsSettings.from_env(source),
        )

    @classmethod
    def variable_names(cls) -> frozenset[str]:
        """Every environment variable the settings read (the worker's and ops' included)."""
        return frozenset(
            spec.metadata["env"]
            for settings_class in (cls, WorkerSettings, OpsSettings)
            for spec in fields(settings_class)
            if "env" in spec.metadata
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
        return self.has_credentials or not self.debug

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
        if not self.auth_disabled and not self.has_credentials:
            problems.append(
                "configure at least one credential: DASHBOARD_USERS (name:role:hash, hash from "
                "`flask --app wsgi hash-password`) or API_TOKENS (name:role:token, token from "
                "`flask --app wsgi new-token`); or set AUTH_DISABLED=true to serve without sign-in "
                "on purpose"
            )
        return problems

    @property
    def has_credentials(self) -> bool:
        """Whether any dashboard user or API token is configured (each entry is one, or a
        start-up error: ``auth/credentials.py``)."""
        return bool(self.user_entries or self.token_entries)

    @property
    def embedded_database(self) -> bool:
        """Whether the app runs on the embedded PostgreSQL: neither ``DATABASE_URL`` nor
        ``POSTGRES_HOST`` is set (``database.resolve_url``)."""
        return not self.database_url and not self.postgres_host

    @property
    def migrates_at_start(self) -> bool:
        """``AUTO_MIGRATE``, or when unset whether the database is the embedded one (a
        newcomer's start migrates it; a real database is migrated by its deploy)."""
        return self.embedded_database if self.auto_migrate is None else self.auto_migrate

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
    """The :class:`Settings` the app was built with (the queue's state object's, :mod:`.state`)."""
    settings: Settings = app.extensions[EXTENSION].settings
    return settings
