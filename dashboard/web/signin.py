"""The dashboard's door: sign-in, sign-out, and who may do what on each page.

When sign-in is required (:attr:`Settings.auth_required`), every dashboard route but the
sign-in page needs a signed-in user; viewers may read everything, operators may also create
and retry jobs (:func:`operator_required`, checked on the server whatever the page showed).
When it is off (development, or ``AUTH_DISABLED=true``), everyone acts as ``anonymous`` with
every right, and every page carries a banner saying so.

Mounted in a host's app (``JobQueue.init_app(..., authorize=)``), the host decides instead:
``authorize(request)`` answers ``"operator"``, ``"viewer"`` or ``None`` (refused, 403) on every
page, the queue's own sign-in pages answer 404, and a form POST still needs its CSRF token.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import Flask, abort, current_app, flash, g, redirect, render_template, session, url_for
from flask_login import current_user, login_user, logout_user
from flask_wtf.csrf import CSRFError, validate_csrf
from htmx_flask import make_response, request
from werkzeug.wrappers import Response
from wtforms import ValidationError

from ..auth import ANONYMOUS, Actor, Role
from ..auth.host import host_actor
from ..auth.session import SIGNED_IN_AT, directory_of
from ..auth.throttle import Throttle, client_address
from ..config import settings_of
from ..mount import EXTENSION, Mount, mount_of
from ..ops import logs
from .blueprint import bp
from .forms import SignInForm, SignOutForm
from .rendering import is_htmx, safe_next

SOURCE = "dashboard"  # the door recorded in the events of dashboard actions
OPEN_ENDPOINTS = {"jobqueue_web.sign_in"}

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Access:
    """What templates need to know about the request's user."""

    required: bool
    actor: Actor
    signed_in: bool
    by_host: bool = False  # the host app's authorize admitted the request (a host's mount)

    @property
    def admitted(self) -> bool:
        """Whether the page shows its contents: no sign-in needed, signed in, or the host said so."""
        return not self.required or self.signed_in or self.by_host

    @property
    def can_operate(self) -> bool:
        return self.actor.may(Role.OPERATOR)

    @property
    def disabled_on_purpose(self) -> bool:
        return settings_of(current_app).auth_disabled


def access() -> Access:
    """The request's :class:`Access`, worked out once per request."""
    if "access" not in g:
        mount = mount_of(current_app)
        if mount.embedded:
            actor = host_actor(mount)
            g.access = Access(True, actor or Actor("", Role.VIEWER, "none"), False, by_host=actor is not None)
        elif not settings_of(current_app).auth_required:
            g.access = Access(False, ANONYMOUS, False)
        elif current_user.is_authenticated:
            g.access = Access(True, current_user.actor, True)
        else:
            g.access = Access(True, Actor("", Role.VIEWER, "none"), False)
    worked_out: Access = g.access
    return worked_out


def current_actor() -> Actor:
    """Who the dashboard request acts for (audit data for the events it writes)."""
    return access().actor


def audit_data() -> dict[str, Any]:
    """Audit fields for the events a dashboard action records: the door, the user and the
    request's id."""
    return current_actor().event_data(SOURCE, **logs.event_fields())


def _sign_out_button() -> SignOutForm:
    """The header's sign-out form, built without reading the request body (``formdata=None``):
    an error page for a body too large (413) or unreadable must not read it again."""
    return SignOutForm(formdata=None)


@bp.context_processor
def inject_access() -> dict[str, Any]:
    return {"access": access, "sign_out_form": _sign_out_button}


def _back_here() -> str:
    """The page to return to after signing in: for htmx, the page the user is on."""
    if is_htmx():
        try:
            current = urlsplit(request.htmx.current_url or "")
        except ValueError:  # a header that is not a URL: start from the overview
            return url_for("jobqueue_web.overview")
        path = current.path + (f"?{current.query}" if current.query else "")
        return safe_next(path) or url_for("jobqueue_web.overview")
    return str(request.full_path).rstrip("?")


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def _host_door(mount: Mount) -> None:
    """A host's mount: the sign-in pages do not exist, the host's answer decides, and a
    state-changing request needs the form's CSRF token (the host's app has no app-wide
    CSRF check of ours)."""
    if request.endpoint in OPEN_ENDPOINTS or request.endpoint == "jobqueue_web.sign_out":
        abort(404)
    if not access().by_host:
        abort(403, description="The application this dashboard is mounted in does not let you see it.")
    if request.method not in SAFE_METHODS:
        field = current_app.config.get("WTF_CSRF_FIELD_NAME", "csrf_token")
        try:
            validate_csrf(request.form.get(field) or request.headers.get("X-CSRFToken"))
        except ValidationError as error:
            raise CSRFError(error.args[0]) from None


@bp.before_request
def require_sign_in() -> Response | None:
    mount = mount_of(current_app)
    if mount.embedded:
        _host_door(mount)
        return None
    if not settings_of(current_app).auth_required or request.endpoint in OPEN_ENDPOINTS:
        return None
    if current_user.is_authenticated:
        return None
    target = url_for("jobqueue_web.sign_in", next=_back_here())
    if is_htmx():  # htmx follows redirects inside the XHR; make it navigate instead
        navigate: Response = make_response("", 401, redirect=target)
        return navigate
    return redirect(target, 303)


def operator_required(view: F) -> F:
    """Refuse (403) a user whose role may not change jobs, whatever the page showed them."""

    @functools.wraps(view)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        actor = current_actor()
        if not actor.may(Role.OPERATOR):
            abort(
                403,
                description=f"You are signed in as {actor.name} with the {actor.role} role, which "
                "may look at everything but not change it. Ask for an operator account.",
            )
        return view(*args, **kwargs)

    return guarded  # type: ignore[return-value]


def throttle_of(app: Flask) -> Throttle:
    throttle: Throttle = app.extensions[EXTENSION].throttle
    return throttle


def sign_in_address() -> str:
    """The client address the throttle counts this request under (a trusted proxy's
    ``X-Forwarded-For``, IPv6 per /64: :func:`..auth.throttle.client_address`)."""
    trusted = current_app.extensions[EXTENSION].trusted_proxies
    return client_address(request.remote_addr, request.headers.get("X-Forwarded-For"), trusted)


@bp.route("/login/", methods=["GET", "POST"])
def sign_in() -> Response | tuple[str, int] | tuple[str, int, dict[str, str]]:
    """Sign in. Throttled (:mod:`..auth.throttle`): an attempt the limits refuse answers 429
    with ``Retry-After`` and checks no password; an admitted one is counted as a failure before
    its password is checked, and a success clears that address's failures for the name."""
    settings = settings_of(current_app)
    form = SignInForm()
    if not form.is_submitted():
        form.next.data = request.args.get("next", "")
    target = safe_next(form.next.data) or url_for("jobqueue_web.overview")
    if not settings.auth_required or current_user.is_authenticated:
        return redirect(target, 303)
    if form.validate_on_submit():
        name, password, address = form.username.data, form.password.data, sign_in_address()
        assert name is not None and password is not None  # both InputRequired, validated above
        throttle = throttle_of(current_app)
        admission = throttle.admit(name, address)  # checked and, if admitted, counted at once
        wait = admission.retry_after
        if wait is not None:
            current_app.logger.warning(
                "Sign-in throttled for user name %r from %s (retry after %ds)", name, address, wait
            )
            form.form_errors.append(f"Too many failed sign-ins. Try again in {wait} seconds.")
            has_users = bool(directory_of(current_app).users)
            page = render_template("jobqueue/signin.html", form=form, has_users=has_users)
            return page, 429, {"Retry-After": str(wait)}
        user = directory_of(current_app).authenticate(name, password)
        if user is not None:
            throttle.succeeded(admission)
            session.clear()  # nothing from before the sign-in carries over
            login_user(user)
            session.permanent = True
            session[SIGNED_IN_AT] = int(time.time())  # the session ends a lifetime after this
            current_app.logger.info("Signed in: %s (%s)", user.name, user.role)
            return redirect(target, 303)
        current_app.logger.warning("Failed sign-in for user name %r from %s", name, address)
        form.form_errors.append("Unknown user name or wrong password.")
    status = 400 if form.is_submitted() else 200
    has_users = bool(directory_of(current_app).users)
    return render_template("jobqueue/signin.html", form=form, has_users=has_users), status


@bp.post("/logout/")
def sign_out() -> Response:
    """Sign out (a POST with the CSRF token); the session cookie is emptied."""
    form = SignOutForm()
    if not form.validate_on_submit():
        abort(400, description="Sign-out needs the form's security token: reload the page and try again.")
    logout_user()
    session.clear()
    flash("Signed out.", "info")
    return redirect(url_for("jobqueue_web.sign_in"), 303)
