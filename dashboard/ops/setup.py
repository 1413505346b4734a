"""The two hooks of :mod:`dashboard.ops`: the app factory's and ``flask worker``'s."""

from __future__ import annotations

from typing import Any

from flask import Flask

from ..config import Settings, settings_of


def init_app(app: Flask, settings: Settings) -> None:
    from . import commands, logs, web_metrics

    logs.init_app(app, settings.ops.log_format)
    web_metrics.init_app(app)
    app.cli.add_command(commands.prune_command)


def init_worker(app: Flask, worker: Any, metrics_port: int | None = None) -> None:
    """Before a worker's threads start: refuse an older schema, serve its metrics.
    (``flask worker`` then starts the retention thread, ``runtime.pruner.start_retention``.)"""
    from . import schema, worker_metrics

    ops = settings_of(app).ops
    schema.require_current(app)
    port = ops.worker_metrics_port if metrics_port is None else metrics_port
    worker_metrics.serve(port, ops.worker_metrics_host, worker)
