"""Operations settings: metrics, logs, retention, the pooler, dead connections.

``LOG_FORMAT``, ``METRICS_*``, ``TRACE_URL_TEMPLATE``, ``JOB_RETENTION_*``, ``JOB_WORKER_METRICS_*``,
``DATABASE_DIRECT_URL``, ``DATABASE_POOLED``, the replica the pages may read
(``DATABASE_REPLICA_URL``, ``DATABASE_REPLICA_MAX_LAG_SECONDS``) and the TCP settings of every
database connection (``DATABASE_KEEPALIVES_*``, ``DATABASE_TCP_USER_TIMEOUT_SECONDS``, read by
``database.tcp_connect_args``); every one safe when unset. ``Settings.ops``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .fields import env, group, values_from_env, when_set
from .parsers import (
    TOKEN_MIN_LENGTH,
    read_bool,
    read_choice,
    read_database_url,
    read_days,
    read_int,
    read_number,
    read_optional_str,
    read_token,
    read_trace_url,
)


@group
@dataclass(frozen=True)
class OpsSettings:
    """How the processes are observed and kept: ``Settings.ops``."""

    log_format: str = field(
        default="text",
        metadata=env(
            "LOG_FORMAT",
            read_choice,
            choices=("text", "json"),
            doc="`json`: web (app and gunicorn) and worker write one JSON object per line.",
        ),
    )
    metrics_token: str | None = field(
        default=None,
        repr=False,
        metadata=env(
            "METRICS_TOKEN",
            read_token,
            min_length=TOKEN_MIN_LENGTH,
            doc="A bearer token for `GET /metrics` only; any `API_TOKENS` token works too.",
        ),
    )
    trace_url_template: str | None = field(
        default=None,
        metadata=env(
            "TRACE_URL_TEMPLATE",
            read_trace_url,
            doc="The job page links its trace id here, `{trace_id}` replaced by it (Jaeger: "
            "`https://jaeger.example/trace/{trace_id}`; Tempo, Honeycomb: the Tracing guide); unset: the "
            "trace id as plain text.",
        ),
    )
    metrics_type_labels: int = field(
        default=50,
        metadata=env(
            "METRICS_TYPE_LABELS",
            read_int,
            minimum=0,
            doc="`/metrics`: how many job types (those with the most live jobs) keep their own `type` "
            'label; the rest are summed as `type="other"`, so a client sending new types cannot add '
            "series.",
        ),
    )
    metrics_queue_labels: int = field(
        default=20,
        metadata=env(
            "METRICS_QUEUE_LABELS",
            read_int,
            minimum=0,
            doc="`/metrics`: how many queues (those with the most live jobs) keep their own `queue` "
            'label; the rest are summed as `queue="other"`.',
        ),
    )
    retention_succeeded_days: float = field(
        default=7.0,
        metadata=env(
            "JOB_RETENTION_SUCCEEDED",
            read_days,
            doc="Days a succeeded job is kept after `finished_at`; `0` keeps forever.",
        ),
    )
    retention_failed_days: float = field(
        default=30.0,
        metadata=env("JOB_RETENTION_FAILED", read_days, doc="The same for failed jobs."),
    )
    retention_interval_seconds: float = field(
        default=60.0,
        metadata=env(
            "JOB_RETENTION_INTERVAL_SECONDS",
            read_number,
            minimum=1,
            doc="How often a worker process runs a retention pass.",
        ),
    )
    worker_metrics_port: int = field(
        default=0,
        metadata=env(
            "JOB_WORKER_METRICS_PORT",
            read_int,
            minimum=0,
            maximum=65535,
            option=True,
            flag="metrics-port",
            doc="Serve each worker process's Prometheus metrics (`/metrics`) on this port; with "
            "`--processes N`, process i on this port + i; `0`: off.",
        ),
    )
    worker_metrics_host: str = field(
        default="127.0.0.1",
        metadata=env(
            "JOB_WORKER_METRICS_HOST",
            read_optional_str,
            doc="Address that endpoint binds (`0.0.0.0` to let a Prometheus on another host scrape it).",
        ),
    )
    database_direct_url: str | None = field(
        default=None,
        repr=False,
        metadata=env(
            "DATABASE_DIRECT_URL",
            read_database_url,
            doc="A direct PostgreSQL URL for what cannot go through a pooler (LISTEN); setting it "
            "declares `DATABASE_URL` a pooler.",
        ),
    )
    database_pooled: bool = field(
        default=False,
        metadata=env(
            "DATABASE_POOLED",
            read_bool,
            derived=when_set("DATABASE_DIRECT_URL"),
            doc="`DATABASE_URL` is a transaction pooler (PgBouncer): no prepared statements, no "
            "session `SET`.",
        ),
    )
    database_replica_url: str | None = field(
        default=None,
        repr=False,
        metadata=env(
            "DATABASE_REPLICA_URL",
            read_database_url,
            doc="A streaming replica for the pages' and the API's lists, counts, charts, search and "
            "event feed; actions, a job's own page and the workers stay on the primary. Unset: "
            "everything reads the primary.",
        ),
    )
    database_replica_max_lag_seconds: float = field(
        default=30.0,
        metadata=env(
            "DATABASE_REPLICA_MAX_LAG_SECONDS",
            read_number,
            minimum=0,
            doc="Reads go to the primary while the replica is further behind than this (or down); "
            "the pages say which they read and how far behind the replica is.",
        ),
    )
    database_keepalives_idle_seconds: int = field(
        default=10,
        metadata=env(
            "DATABASE_KEEPALIVES_IDLE_SECONDS",
            read_int,
            minimum=1,
            doc="TCP keepalive probes on every database connection (the pools', the worker's LISTEN) "
            "after this much silence...",
        ),
    )
    database_keepalives_interval_seconds: int = field(
        default=5,
        metadata=env(
            "DATABASE_KEEPALIVES_INTERVAL_SECONDS",
            read_int,
            minimum=1,
            doc="... then one every this many seconds ...",
        ),
    )
    database_keepalives_count: int = field(
        default=3,
        metadata=env(
            "DATABASE_KEEPALIVES_COUNT",
            read_int,
            minimum=1,
            doc="... and the connection is closed after this many unanswered.",
        ),
    )
    database_tcp_user_timeout_seconds: float = field(
        default=20.0,
        metadata=env(
            "DATABASE_TCP_USER_TIMEOUT_SECONDS",
            read_number,
            minimum=0,
            doc="A connection whose sent data (or probes) stay unacknowledged this long is closed; "
            "`0`: the OS default. With the defaults a dead connection is found within about 20 s. TCP "
            "only (a Unix socket needs none).",
        ),
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OpsSettings:
        return cls(**values_from_env(cls, env))
