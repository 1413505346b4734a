"""Operations settings: metrics, logs, retention, the pooler, dead connections.

``LOG_FORMAT``, ``METRICS_TOKEN``, ``METRICS_TYPE_LABELS``, ``JOB_RETENTION_*``,
``JOB_WORKER_METRICS_*``, ``DATABASE_DIRECT_URL``, ``DATABASE_POOLED`` and the TCP settings of
database connections (``DATABASE_KEEPALIVES_*``, ``DATABASE_TCP_USER_TIMEOUT_SECONDS``); every
one safe when unset. One field per setting, as in :mod:`.config` (``Settings.ops``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .config_parsers import (
    TOKEN_MIN_LENGTH,
    env,
    read_bool_if_set,
    read_choice,
    read_days,
    read_int,
    read_number,
    read_optional_str,
    read_token,
    values_from_env,
)


@dataclass(frozen=True)
class OpsSettings:
    """How the processes are observed and kept: ``Settings.ops``."""

    log_format: str = field(default="text", metadata=env("LOG_FORMAT", read_choice, choices=("text", "json")))
    metrics_token: str | None = field(
        default=None, repr=False, metadata=env("METRICS_TOKEN", read_token, min_length=TOKEN_MIN_LENGTH)
    )
    # /metrics: the job types with the most live jobs keep their own ``type`` label; the rest
    # are summed under ``type="other"``, so a client sending new types cannot add series.
    metrics_type_labels: int = field(default=50, metadata=env("METRICS_TYPE_LABELS", read_int, minimum=0))
    # The same for the ``queue`` label: the queues with the most live jobs, the rest "other".
    metrics_queue_labels: int = field(default=20, metadata=env("METRICS_QUEUE_LABELS", read_int, minimum=0))
    retention_succeeded_days: float = field(default=7.0, metadata=env("JOB_RETENTION_SUCCEEDED", read_days))
    retention_failed_days: float = field(default=30.0, metadata=env("JOB_RETENTION_FAILED", read_days))
    retention_interval_seconds: float = field(
        default=60.0, metadata=env("JOB_RETENTION_INTERVAL_SECONDS", read_number, minimum=1)
    )
    worker_metrics_port: int = field(  # 0: off
        default=0,
        metadata=env(
            "JOB_WORKER_METRICS_PORT",
            read_int,
            minimum=0,
            maximum=65535,
            option="Serve this worker's Prometheus metrics on this port; 0 = off",
            flag="metrics-port",
        ),
    )
    worker_metrics_host: str = field(
        default="127.0.0.1", metadata=env("JOB_WORKER_METRICS_HOST", read_optional_str)
    )
    database_direct_url: str | None = field(
        default=None, repr=False, metadata=env("DATABASE_DIRECT_URL", read_optional_str)
    )
    # Unset: true when DATABASE_DIRECT_URL is set.
    database_pooled: bool = field(
        default=False,
        metadata=env("DATABASE_POOLED", read_bool_if_set, default_from="database_direct_url"),
    )
    # TCP on every database connection (libpq's keepalives_* and tcp_user_timeout; TCP only,
    # a Unix socket needs none): a connection whose peer went silent (a partition that drops
    # packets, a host that died) is closed, and the thread waiting on it gets an error, within
    # about 20 s instead of the operating system's two hours (database.tcp_connect_args).
    database_keepalives_idle_seconds: int = field(
        default=10, metadata=env("DATABASE_KEEPALIVES_IDLE_SECONDS", read_int, minimum=1)
    )
    database_keepalives_interval_seconds: int = field(
        default=5, metadata=env("DATABASE_KEEPALIVES_INTERVAL_SECONDS", read_int, minimum=1)
    )
    database_keepalives_count: int = field(
        default=3, metadata=env("DATABASE_KEEPALIVES_COUNT", read_int, minimum=1)
    )
    database_tcp_user_timeout_seconds: float = field(  # 0: the operating system's default
        default=20.0, metadata=env("DATABASE_TCP_USER_TIMEOUT_SECONDS", read_number, minimum=0)
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> OpsSettings:
        return cls(**values_from_env(cls, env))
