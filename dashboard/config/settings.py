"""Every setting, read once from the environment: :class:`Settings`, the root.

Each setting is one dataclass field whose metadata (:func:`.fields.env`) names its environment
variable, its parser (:mod:`.parsers`) and its one description; the default is written once, as
the field's default, or derived from other settings (:class:`.fields.Derived`). The worker's
settings are :class:`.worker.WorkerSettings` (``Settings.worker``), the operations ones
:class:`.ops.OpsSettings` (``Settings.ops``). Nothing else in the project reads
``os.environ``: the app factory builds one :class:`Settings` and everything downstream
receives it (:func:`settings_of`).

A malformed value is a start-up error naming the variable, never a silent default. The
credentials (``DASHBOARD_USERS``, ``API_TOKENS`` and their ``_FILE``) are read here as entries
and parsed by ``auth/credentials.py``, which knows what a user and a token are; the app
factory parses them before anything else, so a malformed one stops the start too. This package
imports nothing of ``auth``: everything reads the settings, so they sit below every package.
"""

from __future__ import annotations

import os
import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from ..mount import EXTENSION
from .fields import Derived, env, follows, group, values_from_env
from .ops import OpsSettings
from .parsers import (
    Entry,
    read_bool,
    read_database_url,
    read_entries,
    read_int,
    read_list,
    read_networks,
    read_number,
    read_optional_str,
    read_secret,
    read_str,
    read_time_zone,
)
from .rules import BIGINT_MAX, TYPE_MAX_LENGTH
from .secret_key import (
    DEV_SECRET_KEY,
    SECRET_KEY_MIN_BITS,
    SECRET_KEY_MIN_DISTINCT,
    SECRET_KEY_MIN_LENGTH,
    secret_key_is_strong,
)
from .worker import WorkerSettings

if TYPE_CHECKING:
    from flask import Flask

PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
API_OFFSET_MAX = 10_000  # the default of API_OFFSET_MAX, the deepest offset the API serves
# The origins the API answers CORS requests from in development: localhost on any port.
DEV_CORS_ORIGIN = re.compile(r"https?://(localhost|127\.0\.0\.1|\[::1\])(:[0-9]{1,5})?\Z", re.IGNORECASE)


def embedded(database_url: str | None, postgres_host: str | None) -> bool:
    """Whether the app runs on the embedded PostgreSQL: neither ``DATABASE_URL`` nor
    ``POSTGRES_HOST`` is set (``database.resolve_url``)."""
    return not database_url and not postgres_host


ON_THE_EMBEDDED_DATABASE = Derived(
    ("DATABASE_URL", "POSTGRES_HOST"),
    embedded,
    "true on the embedded database (neither `DATABASE_URL` nor `POSTGRES_HOST` set)",
)


@group
@dataclass(frozen=True)
class Settings:
    """Everything the application reads from its environment."""

    database_url: str | None = field(
        default=None,
        metadata=env(
            "DATABASE_URL",
            read_database_url,
            doc="`postgresql://…` or `postgresql+psycopg://…`, used as is. Several hosts, in libpq's "
            "form (`postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write`) or SQLAlchemy's "
            "(`?host=h1:5432&host=h2:5432`): the processes find the primary after a failover "
            "(docs: high availability). Unset: the `POSTGRES_*` "
            "settings when `POSTGRES_HOST` is set, else an embedded PostgreSQL 16 (`pgserver`) in the "
            "instance folder, shared by web and worker.",
        ),
    )
    postgres_db: str = field(
        default="job_queue", metadata=env("POSTGRES_DB", read_str, doc="Database name, with `POSTGRES_HOST`.")
    )
    postgres_user: str = field(
        default="postgres",
        metadata=env("POSTGRES_USER", read_str, doc="Database user, with `POSTGRES_HOST`."),
    )
    postgres_password: str = field(
        default="postgres",
        metadata=env("POSTGRES_PASSWORD", read_str, doc="Database password, with `POSTGRES_HOST`."),
    )
    postgres_host: str | None = field(
        default=None,
        metadata=env(
            "POSTGRES_HOST", read_optional_str, doc="Database host, used when `DATABASE_URL` is unset."
        ),
    )
    postgres_port: int = field(
        default=5432,
        metadata=env("POSTGRES_PORT", read_int, minimum=1, doc="Database port, with `POSTGRES_HOST`."),
    )
    conn_max_age: float = field(
        default=0.0,
        metadata=env(
            "POSTGRES_CONN_MAX_AGE",
            read_number,
            minimum=0,
            doc="Seconds before a pooled connection is recycled; 0 keeps it until it fails (pre-ping "
            "replaces broken ones).",
        ),
    )
    debug: bool = field(
        default=True,
        metadata=env(
            "DEBUG",
            read_bool,
            doc="Development mode: no sign-in unless users or tokens are configured; `false` requires a "
            "real `SECRET_KEY` and a credential (or `AUTH_DISABLED`).",
        ),
    )
    secret_key: str = field(
        default=DEV_SECRET_KEY,
        metadata=env(
            "SECRET_KEY",
            read_secret,
            doc=f"Signs sessions and CSRF tokens; with `DEBUG=false`, at least {SECRET_KEY_MIN_LENGTH} "
            f"characters, {SECRET_KEY_MIN_DISTINCT} of them distinct, about {SECRET_KEY_MIN_BITS} bits "
            "by its alphabet, and not the development key.",
        ),
    )
    allowed_hosts: tuple[str, ...] = field(
        default=("localhost", "127.0.0.1", "0.0.0.0"),
        metadata=env("ALLOWED_HOSTS", read_list, doc="Trusted `Host` headers (`*` for any)."),
    )
    cors_allowed_origins: tuple[str, ...] = field(
        default=(),
        metadata=env(
            "CORS_ALLOWED_ORIGINS",
            read_list,
            doc="Browser origins allowed to call the API (in development, localhost origins are allowed "
            "too).",
        ),
    )
    enable_debug_toolbar: bool = field(
        default=True,
        metadata=env(
            "ENABLE_DEBUG_TOOLBAR",
            read_bool,
            derived=follows("DEBUG"),
            doc="Flask-DebugToolbar for requests from `INTERNAL_IPS`; never with a credential configured "
            "or through a proxy.",
        ),
    )
    internal_ips: tuple[str, ...] = field(
        default=("127.0.0.1", "localhost", "host.docker.internal"),
        metadata=env("INTERNAL_IPS", read_list, doc="Who sees the debug toolbar."),
    )
    time_zone: str = field(
        default="UTC",
        metadata=env("TIME_ZONE", read_time_zone, doc="Time zone of timestamps in JSON and on pages."),
    )
    max_content_length: int = field(
        default=1_048_576,
        metadata=env("MAX_CONTENT_LENGTH", read_int, minimum=1024, doc="Largest request body in bytes."),
    )
    stats_exact_below_rows: int = field(
        default=100_000,
        metadata=env(
            "STATS_EXACT_BELOW_ROWS",
            read_int,
            minimum=0,
            doc="Below this many jobs (planner estimate) stats are counted exactly.",
        ),
    )
    stats_refresh_seconds: float = field(
        default=30.0,
        metadata=env(
            "STATS_REFRESH_SECONDS",
            read_number,
            minimum=0,
            doc="Above it, how old the cached succeeded/failed totals may get before a background recount.",
        ),
    )
    dashboard_query_timeout_ms: int = field(
        default=2000,
        metadata=env(
            "DASHBOARD_QUERY_TIMEOUT_MS",
            read_int,
            minimum=0,
            doc="`statement_timeout` of each overview panel's reads (a panel past it is left out, the "
            "page still renders) and of every API request's reads (503 past it); 0: none.",
        ),
    )
    api_offset_max: int = field(
        default=API_OFFSET_MAX,
        metadata=env(
            "API_OFFSET_MAX",
            read_int,
            minimum=0,
            maximum=BIGINT_MAX,
            doc="The deepest `offset` `GET /api/jobs/` serves (400 past it): an offset reads every job "
            "it skips.",
        ),
    )
    auth_disabled: bool = field(
        default=False,
        metadata=env(
            "AUTH_DISABLED",
            read_bool,
            doc="`true` serves with no sign-in even with `DEBUG=false` (a banner says so).",
        ),
    )
    # The credentials as configured, each entry unparsed (auth/credentials.py parses them).
    user_entries: tuple[Entry, ...] = field(
        default=(),
        metadata=env(
            "DASHBOARD_USERS",
            read_entries,
            doc="Dashboard users, `name:role:hash` separated by commas or newlines; role `viewer` or "
            "`operator`; hash from `flask --app wsgi hash-password`. `DASHBOARD_USERS_FILE` names a "
            "file of more, one per line.",
        ),
    )
    token_entries: tuple[Entry, ...] = field(
        default=(),
        metadata=env(
            "API_TOKENS",
            read_entries,
            doc="API tokens, `name:role:token` or `name:role:sha256:<hex digest>`, from `flask --app "
            "wsgi new-token`. `API_TOKENS_FILE` names a file of more, one per line.",
        ),
    )
    session_lifetime_hours: float = field(
        default=12.0,
        metadata=env(
            "SESSION_LIFETIME_HOURS",
            read_number,
            minimum=0.01,
            doc="A dashboard session ends this long after its sign-in, however often it is used.",
        ),
    )
    session_cookie_secure: bool = field(
        default=False,
        metadata=env(
            "SESSION_COOKIE_SECURE",
            read_bool,
            doc="Always mark the session cookie `Secure` (it already is on every HTTPS request).",
        ),
    )
    signin_max_failures_per_user: int = field(
        default=5,
        metadata=env(
            "SIGNIN_MAX_FAILURES_PER_USER",
            read_int,
            minimum=1,
            doc="Failed sign-ins for one user name from one client address within the window before that "
            "address gets 429 for that name.",
        ),
    )
    signin_max_failures_per_address: int = field(
        default=20,
        metadata=env(
            "SIGNIN_MAX_FAILURES_PER_ADDRESS",
            read_int,
            minimum=1,
            doc="Distinct user names that may fail from one client address within the window before it "
            "gets 429 for any other name.",
        ),
    )
    signin_window_seconds: float = field(
        default=300.0,
        metadata=env(
            "SIGNIN_WINDOW_SECONDS", read_number, minimum=1, doc="How far back failed sign-ins count."
        ),
    )
    signin_slow_after_failures_per_user: int = field(
        default=20,
        metadata=env(
            "SIGNIN_SLOW_AFTER_FAILURES_PER_USER",
            read_int,
            minimum=1,
            doc="Failed sign-ins for one user name from all addresses within the window after which each "
            "address gets one failure for it per window.",
        ),
    )
    forwarded_allow_ips: tuple[str, ...] = field(
        default=("127.0.0.1", "::1"),
        metadata=env(
            "FORWARDED_ALLOW_IPS",
            read_networks,
            doc="Proxies (addresses or networks, or `*`) trusted for `X-Forwarded-Proto` (gunicorn reads "
            "the same variable, with the same default) and for `X-Forwarded-For` (the sign-in "
            "throttle's client address).",
        ),
    )
    job_types_strict: bool = field(
        default=False,
        metadata=env(
            "JOB_TYPES_STRICT",
            read_bool,
            doc="`true`: the API, bulk create and the create form refuse job types not registered in the "
            f"web process; `false`: any type of 1 to {TYPE_MAX_LENGTH} characters (a worker without its "
            "handler fails the attempt).",
        ),
    )
    instance_path: str = field(
        default=os.path.join(PROJECT_ROOT, "instance"),
        metadata=env(
            "INSTANCE_PATH",
            read_optional_str,
            doc="The Flask instance folder; the embedded database keeps its data in `pgdata` under it.",
        ),
    )
    auto_migrate: bool = field(
        default=True,
        metadata=env(
            "AUTO_MIGRATE",
            read_bool,
            derived=ON_THE_EMBEDDED_DATABASE,
            doc="Apply migrations at start; when off, run `flask --app wsgi db upgrade` in the deploy.",
        ),
    )
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
        """Whether the app runs on the embedded PostgreSQL (:func:`embedded`)."""
        return embedded(self.database_url, self.postgres_host)

    @property
    def migrates_at_start(self) -> bool:
        """``AUTO_MIGRATE``: unset, whether the database is the embedded one (a newcomer's start
        migrates it; a real database is migrated by its deploy)."""
        return self.auto_migrate

    @property
    def tz(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.time_zone)


def settings_of(app: Flask) -> Settings:
    """The :class:`Settings` the app was built with (the queue's state object's, :mod:`dashboard.state`)."""
    settings: Settings = app.extensions[EXTENSION].settings
    return settings
