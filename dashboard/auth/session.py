"""Dashboard sessions: Flask-Login over Flask's signed cookie, with the cookie flags set.

- ``HttpOnly`` and ``SameSite=Lax`` always;
- ``Secure`` whenever the request came over HTTPS (directly, or through a proxy gunicorn
  trusts: ``FORWARDED_ALLOW_IPS``), or always with ``SESSION_COOKIE_SECURE=true``;
- a session lasts ``SESSION_LIFETIME_HOURS`` from the sign-in, not from the last request:
  the cookie's expiry and Flask's signature age both enforce it, and :func:`load_user`
  refuses a session whose sign-in time is older, however often it was used since.

The session lives in the signed cookie only (no server-side store): signing out clears it in
that browser, while a copy of the cookie stays valid until its lifetime ends. Changing the
user's password hash, or ``SECRET_KEY``, ends every session at once.

The JSON API (``/api`` and every path under it, ``Mount.is_api_path``) authenticates bearer
tokens only and never reads the session: its requests get Flask's null session, so the cookie
is neither verified nor re-sent, and the answers carry no ``Vary: Cookie``.
"""

from __future__ import annotations

import time
from datetime import timedelta

from flask import Flask, Request, current_app, has_request_context, request, session
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from flask_login import LoginManager
from itsdangerous import URLSafeTimedSerializer

from ..config import Settings
from ..mount import EXTENSION, mount_of
from .principals import Directory, User

login_manager = LoginManager()


class SessionCookies(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, with ``Secure`` decided per request and the signer built
    once per secret key instead of on every request (opening and saving each built one)."""

    def __init__(self) -> None:
        self._signers: dict[tuple[object, ...], URLSafeTimedSerializer] = {}

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        """No session for the API, which knows bearer tokens only (see the module docstring)."""
        if mount_of(app).is_api_path(request.path):  # opened before the URL is matched: the path decides
            return self.make_null_session(app)
        return super().open_session(app, request)

    def get_cookie_secure(self, app: Flask) -> bool:
        configured = bool(app.config.get("SESSION_COOKIE_SECURE"))
        return configured or (has_request_context() and request.is_secure)

    def get_signing_serializer(self, app: Flask) -> URLSafeTimedSerializer | None:
        """The same signer as Flask's, cached for the app's current ``SECRET_KEY`` (and its
        fallbacks): a key that changes (tests, a rotation) gets a new one."""
        if not app.secret_key:
            return None
        key = (id(app), app.secret_key, tuple(app.config.get("SECRET_KEY_FALLBACKS") or ()))
        signer = self._signers.get(key)
        if signer is None:
            signer = super().get_signing_serializer(app)
            if signer is not None:
                self._signers = {key: signer}  # one app, one key in force: keep only the newest
        return signer


def directory_of(app: Flask) -> Directory:
    directory: Directory = app.extensions[EXTENSION].directory
    return directory


SIGNED_IN_AT = "signed_in_at"  # session key: when the user signed in (Unix seconds)


def load_user(session_id: str) -> User | None:
    """The signed-in user, unless the session outlived ``SESSION_LIFETIME_HOURS`` since the
    sign-in itself: a session kept alive by polling, or a copied cookie, still ends then."""
    signed_in_at = session.get(SIGNED_IN_AT)
    lifetime = current_app.permanent_session_lifetime.total_seconds()
    if not isinstance(signed_in_at, int) or not 0 <= time.time() - signed_in_at <= lifetime:
        return None
    return directory_of(current_app).user_for_session(session_id)


login_manager.user_loader(load_user)  # registered by a call: Flask-Login's decorator is untyped


def init_app(app: Flask, settings: Settings) -> None:
    app.session_interface = SessionCookies()
    app.config["SESSION_COOKIE_HTTPONLY"] = True
    app.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    app.config["SESSION_COOKIE_SECURE"] = settings.session_cookie_secure
    app.config["PERMANENT_SESSION_LIFETIME"] = timedelta(hours=settings.session_lifetime_hours)
    login_manager.session_protection = "basic"
    login_manager.init_app(app)
