"""Running it for real (issue 19): metrics, structured logs, readiness, retention, pooler.

- :mod:`.logs`: ``LOG_FORMAT`` text/json, request ids, the running attempt's ids on log lines;
- :mod:`.web_metrics`: ``GET /metrics`` (queue gauges) on the web process;
- :mod:`.worker_metrics`: a worker process's counters, served on ``JOB_WORKER_METRICS_PORT``;
- :mod:`.schema`: is the database at this code's migration head (``/api/ready/``, worker start);
- :mod:`.pooling`: what changes behind PgBouncer in transaction mode (``DATABASE_DIRECT_URL``);
- :mod:`.commands`: ``flask prune``; the retention itself is ``queue.retention``.

Two entry points keep the hooks in existing code to one line each: :func:`init_app` (the
app factory) and :func:`init_worker` (``flask worker``, before its threads start).
"""

from __future__ import annotations

from typing import Any

from flask import Flask

from ..config import Settings


def init_app(app: Flask, settings: Settings) -> None:
    from . import commands, logs, web_metrics

    logs.init_app(app, settings.ops.log_format)
    web_metrics.init_app(app)
    app.cli.add_command(commands.prune_command)


def init_worker(app: Flask, worker: Any, metrics_port: int | None = None) -> None:
    """Before a worker's threads start: refuse an older schema, serve metrics, start retention."""
    from ..queue.retention import Pruner
    from . import schema, worker_metrics

    ops = app.extensions["jobqueue.settings"].ops
    schema.require_current(app)
    port = ops.worker_metrics_port if metrics_port is None else metrics_port
    worker_metrics.serve(port, ops.worker_metrics_host, worker)
    days = {"succeeded": ops.retention_succeeded_days, "failed": ops.retention_failed_days}
    Pruner(app, days, ops.retention_interval_seconds, worker.stopping).start()
