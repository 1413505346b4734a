"""CLI commands: ``flask --app wsgi worker``."""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
from typing import Any

import click
from flask import Flask, current_app
from flask.cli import with_appcontext
from flask.logging import default_handler

from .logsafe import SafeFormatter

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMAT = "%(asctime)s %(levelname)-7s [%(threadName)s] %(name)s: %(message)s"


def init_app(app: Flask) -> None:
    """Register the project's commands on ``app``."""
    app.cli.add_command(worker_command)


def _finite(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise click.BadParameter(f"must be a finite number, got {value!r}")
    return value


def configure_logging(level: str) -> None:
    """Log to stderr: the project's loggers at ``level``, everything else at WARNING.

    Third-party loggers stay at WARNING so that ``DEBUG`` shows the worker's polls, claims and
    executions, not every SQL statement.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter(LOG_FORMAT))  # a value cannot forge a line
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    project = logging.getLogger("dashboard")
    project.removeHandler(default_handler)  # Flask's app logger handler would log twice
    project.setLevel(level)


@click.command("worker")
@click.option("--threads", type=click.IntRange(min=1), help="Worker threads [JOB_WORKER_THREADS].")
@click.option(
    "--poll-interval-ms",
    type=click.FloatRange(min=0),
    callback=_finite,
    help="Sleep when nothing is claimable [JOB_WORKER_POLL_INTERVAL_MS].",
)
@click.option(
    "--lease-seconds",
    type=click.FloatRange(min=0.01),
    callback=_finite,
    help="Lease of a running attempt [JOB_WORKER_LEASE_SECONDS].",
)
@click.option(
    "--cleanup-interval-seconds",
    type=click.FloatRange(min=0),
    callback=_finite,
    help="How often each thread rescues expired leases [JOB_WORKER_CLEANUP_INTERVAL_SECONDS].",
)
@click.option(
    "--cleanup-batch-size",
    type=click.IntRange(min=1),
    help="Expired leases rescued per pass at most [JOB_WORKER_CLEANUP_BATCH_SIZE].",
)
@click.option(
    "--backoff-base-seconds",
    type=click.FloatRange(min=0),
    callback=_finite,
    help="Retry delay after the first failed attempt [JOB_WORKER_BACKOFF_BASE_SECONDS].",
)
@click.option(
    "--backoff-max-seconds",
    type=click.FloatRange(min=0),
    callback=_finite,
    help="Longest retry delay [JOB_WORKER_BACKOFF_MAX_SECONDS].",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    help="Jobs claimed in one statement; at most twice this many held claimed ahead of the threads; "
    "1 claims per thread [JOB_WORKER_BATCH_SIZE].",
)
@click.option(
    "--listen/--no-listen",
    default=None,
    help="Wake idle threads on NOTIFY instead of waiting for the next poll [JOB_WORKER_LISTEN].",
)
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    help="DEBUG logs every poll, claim and execution [JOB_WORKER_LOG_LEVEL].",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    help="Serve this worker's Prometheus metrics on this port; 0 = off [JOB_WORKER_METRICS_PORT].",
)
@with_appcontext
def worker_command(**options: Any) -> None:
    """Run job worker threads until SIGINT/SIGTERM.

    Options override the JOB_WORKER_* environment variables. The first signal stops claiming
    and lets running jobs finish (exit 0); a second one exits at once (exit 128 + signal).
    """
    from .config import settings_of
    from .extensions import db
    from .ops import schema
    from .ops.logs import install as install_logs
    from .runtime.handlers import registered_types
    from .runtime.worker import Worker, settings_banner

    app = current_app._get_current_object()  # type: ignore[attr-defined]
    metrics_port = options.pop("metrics_port")  # an operations setting (OpsSettings), not a worker one
    overrides = {name: value for name, value in options.items() if value is not None}
    if "log_level" in overrides:
        overrides["log_level"] = overrides["log_level"].upper()
    settings = dataclasses.replace(settings_of(app).worker, **overrides)
    ops = settings_of(app).ops
    if metrics_port is not None:
        ops = dataclasses.replace(ops, worker_metrics_port=metrics_port)
    _check_pool(app, settings.threads)

    configure_logging(settings.log_level)
    install_logs(ops.log_format, project_level=settings.log_level)
    log = logging.getLogger("dashboard.runtime.worker")
    log.info(settings_banner(settings, registered_types()))
    log.info("database: %s", db.engine.url.render_as_string(hide_password=True))

    schema.require_current(app)  # an older schema: refuse to start, naming the command to run
    worker = Worker(app, settings, ops=ops)  # its services: metrics, retention, heartbeat, ...
    sys.exit(worker.run_until_signalled())


def _check_pool(app: Flask, threads: int) -> None:
    """Every thread keeps a connection, and batch mode adds a dispatcher and a completer."""
    options = app.config.get("SQLALCHEMY_ENGINE_OPTIONS", {})
    capacity = int(options.get("pool_size", 5)) + int(options.get("max_overflow", 0))
    needed = threads + 4  # the rescuer, and in batch mode the dispatcher and the completer
    if needed > capacity:
        raise click.UsageError(
            f"--threads {threads} needs {needed} database connections but the pool holds {capacity}; "
            f"set JOB_WORKER_THREADS={threads} in the environment instead, so the pool is sized for them"
        )
