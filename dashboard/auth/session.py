"""Dashboard sessions: Flask-Login over Flask's signed cookie, with the cookie flags set.

- ``HttpOnly`` and ``SameSite=Lax`` always;
- ``Secure`` whenever the request came over HTTPS (directly, or through a proxy gunicorn
  trusts: ``FORWARDED_ALLOW_IPS``), or always with ``SESSION_COOKIE_SECURE=true``;
- the session is permanent with a sliding lifetime (``SESSION_LIFETIME_HOURS``): Flask
  refuses a cookie signed longer ago than that, whatever the browser kept.
"""

from __future__ import annotations

from datetime import timedelta

from flask import Flask, current_app, has_request_context, request
from flask.sessions import SecureCookieSessionInterface
from flask_login import LoginManager

from ..config import Settings
from .principals import Directory, User

login_manager = LoginManager()


class SessionCookies(SecureCookieSessionInterface):
    def get_cookie_secure(self, app: Flask) -> bool:
        configured = bool(app.config.get("SESSION_COOKIE_SECURE"))
        return configured or (has_request_context() and request.is_secure)


def directory_of(app: Flask) -> Directory:
    return app.extensions["jobqueue.directory"]


@login_manager.user_loader
def load_user(session_id: str) -> User | None:
    return directory_of(current_app).user_for_session(session_id)


def init_app(app: Flask, settings: Settings) -> None:
    app.session_interface = SessionCookies()
    app.config["SESSION_COOKIE_HTTPONLY"] = True
    app.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    app.config["SESSION_COOKIE_SECURE"] = settings.session_cookie_secure
    app.config["PERMANENT_SESSION_LIFETIME"] = timedelta(hours=settings.session_lifetime_hours)
    login_manager.session_protection = "basic"
    login_manager.init_app(app)
