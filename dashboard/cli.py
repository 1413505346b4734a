"""CLI commands (``flask worker`` arrives with issue 3)."""

from flask import Flask


def init_app(app: Flask) -> None:
    """Register the project's commands on ``app``."""
