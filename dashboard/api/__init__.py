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

from ..extension import door
from ..extensions import csrf
from ..mount import Mount
from . import access, bulk, docs, errors, jobs, queues, ready, schedules, workflows
from .blueprint import bp, routes


def _install_cors(state: BlueprintSetupState) -> None:
    from ..config import settings_of

    app = state.app
    assert isinstance(app, Flask)  # a blueprint is registered on a Flask app, never a bare sansio one
    settings = settings_of(app)
    errors.install_cors(app, settings.cors_allowed_origins, development=settings.debug)


@door
def mount_api(app: Flask, mount: Mount) -> None:
    """The JSON API under the mount's prefix + ``/api``."""
    app.register_blueprint(bp, url_prefix=mount.api_prefix)


errors.register(bp)
bp.before_request(access.authenticate)
csrf.exempt(bp)
bp.record_once(_install_cors)

__all__ = ["bp", "bulk", "docs", "jobs", "queues", "ready", "routes", "schedules", "workflows"]
