"""JSON API blueprint, mounted at ``/api``: jobs, events, stats, health and
config, for scripts.

Every input is validated by the models in :mod:`.inputs` through the route registry, every
answer is serialised through :mod:`.outputs`, and ``/api/schema/`` is generated from both.
The API is exempt from the dashboard's CSRF protection (its clients are scripts, which send
JSON, not forms with a session cookie; they authenticate with bearer tokens, see
:mod:`.access`) and answers CORS requests from
``CORS_ALLOWED_ORIGINS`` (and localhost origins when ``DEBUG``).
"""

from flask import Flask
from flask.blueprints import BlueprintSetupState

from ..extensions import csrf
from . import access, bulk, docs, errors, queues, ready, schedules, views
from .blueprint import bp, routes


def _install_cors(state: BlueprintSetupState) -> None:
    from ..config import settings_of

    app = state.app
    assert isinstance(app, Flask)  # a blueprint is registered on a Flask app, never a bare sansio one
    settings = settings_of(app)
    errors.install_cors(app, settings.cors_allowed_origins, development=settings.debug)


errors.register(bp)
bp.before_request(access.authenticate)
csrf.exempt(bp)
bp.record_once(_install_cors)

__all__ = ["bp", "bulk", "docs", "queues", "ready", "routes", "schedules", "views"]
