"""The app factory's hook into :mod:`dashboard.ops`: log format and request ids, the queue
gauges' collector (served by ``web/metrics.py``), ``flask prune``."""

from __future__ import annotations

from flask import Flask

from ..config import Settings


def init_app(app: Flask, settings: Settings) -> None:
    from . import commands, logs, web_metrics

    logs.init_app(app, settings.ops.log_format)
    web_metrics.init_app(app)
    app.cli.add_command(commands.prune_command)
