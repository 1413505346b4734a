"""Access control: who may read, who may change jobs, and the headers that keep a browser safe.

- :mod:`.credentials`: the configured users and API tokens, parsed and checked;
- :mod:`.principals`: roles, the directory of users and tokens, the actor recorded in events;
- :mod:`.bearer`: ``Authorization: Bearer <token>``, read once for the API and ``/metrics``;
- :mod:`.session`: dashboard sign-in sessions (Flask-Login) and their cookie flags;
- :mod:`.headers`: Content-Security-Policy and the other security headers;
- :mod:`.commands`: ``flask hash-password`` and ``flask new-token``;
- :mod:`.throttle`: the sign-in throttle (failures per user name and client address, per name,
  per address; counted in the database so every web worker shares them).

The doors enforce it: the dashboard blueprint (``web.signin``) and the JSON blueprint
(``api.access``). Whether sign-in is required is :attr:`Settings.auth_required`.
"""

from __future__ import annotations

from flask import Flask

from ..config import Settings
from ..mount import EXTENSION
from ..roles import Role
from . import commands, headers, session
from .principals import ANONYMOUS, Actor, Directory
from .throttle import Throttle, parse_trusted


def init_app(app: Flask, settings: Settings, directory: Directory, *, debug_toolbar: bool) -> None:
    """Access control on ``app``: the ``directory`` of users and tokens (built from
    ``settings`` first by the app factory, so a malformed entry stops the start), the sign-in
    throttle, sessions, security headers and the credential commands."""
    state = app.extensions[EXTENSION]
    state.directory = directory
    state.throttle = Throttle(
        max_per_user=settings.signin_max_failures_per_user,
        max_per_address=settings.signin_max_failures_per_address,
        window_seconds=settings.signin_window_seconds,
        slow_after_per_user=settings.signin_slow_after_failures_per_user,
    )
    state.trusted_proxies = parse_trusted(",".join(settings.forwarded_allow_ips))
    session.init_app(app, settings)
    headers.init_app(app, debug_toolbar=debug_toolbar, hsts=not settings.debug)
    commands.init_app(app)


__all__ = ["ANONYMOUS", "Actor", "Directory", "Role", "Throttle", "init_app"]
