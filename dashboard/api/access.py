"""The API's door: bearer tokens from ``API_TOKENS``, each with a role.

Reads need a viewer token, writes (every method but GET: jobs, queues, schedules, workflows) an
operator token. In the standalone app the health and readiness checks stay open for load balancers, and
so do the schema and its docs page, which describe the interface and hold no job data. Mounted
in a host's app they are not open: a token opens them, or the host's ``authorize`` admitting the
request (they only read), so the pages' link to the API docs works for the host's signed-in
users. CORS preflights pass (browsers send them without credentials); the request that
follows is checked.

A missing, malformed or unknown token is a 401 with ``WWW-Authenticate: Bearer``; a token
whose role is too small is a 403. Tokens are compared as SHA-256 digests in constant time and
never written to a log: only the token's configured name is, and goes into the audit data.
"""

from __future__ import annotations

from flask import current_app, g, request

from ..auth import ANONYMOUS, Actor, Role
from ..auth.bearer import BearerError, bearer_token
from ..auth.host import host_actor
from ..auth.session import directory_of
from ..config import settings_of
from ..mount import mount_of
from ..ops import logs
from .errors import UNKNOWN_PATH, ApiError

SOURCE = "api"
OPEN_ENDPOINTS = frozenset(
    {"jobqueue_api.health", "jobqueue_api.ready", "jobqueue_api.schema", "jobqueue_api.docs"}
)
UNKNOWN_ENDPOINT = f"jobqueue_api.{UNKNOWN_PATH}"
READ_METHODS = frozenset({"GET", "HEAD"})
REALM = 'Bearer realm="job-queue"'


def unauthorized(detail: str, error: str | None = None) -> ApiError:
    challenge = f'{REALM}, error="{error}"' if error else REALM
    return ApiError(401, detail, headers={"WWW-Authenticate": challenge})


def presented_token() -> str:
    """The request's bearer token (``auth.bearer``), or a 401 saying what is wrong."""
    try:
        return bearer_token(request.headers.get("Authorization"))
    except BearerError as problem:
        if problem.missing:
            raise unauthorized(
                "Authentication required: send the header Authorization: Bearer <token>."
            ) from None
        raise unauthorized(
            "Malformed Authorization header: expected Bearer <token>.", error="invalid_request"
        ) from None


def authenticate() -> None:
    """Runs before every API view: sets ``g.api_actor`` or refuses the request."""
    g.api_actor = ANONYMOUS
    mount = mount_of(current_app)
    if request.method == "OPTIONS" or request.endpoint == UNKNOWN_ENDPOINT:
        return  # a preflight, or a path no API route serves (a JSON 404 says only that)
    if request.endpoint in OPEN_ENDPOINTS:
        if not mount.embedded or host_actor(mount) is not None:
            return
    # Mounted in a host's app, the API needs a token: the host's authorize decides for the
    # pages and the open reads only, and a cookie the host's sign-in set must not make the JSON
    # API writable from another site (the API is not CSRF-protected).
    elif not settings_of(current_app).auth_required and not mount.embedded:
        return
    token = directory_of(current_app).token_owner(presented_token())
    if token is None:
        _log_refusal("unknown token")
        raise unauthorized("Invalid token.", error="invalid_token")
    needed = Role.VIEWER if request.method in READ_METHODS else Role.OPERATOR
    if not token.role.allows(needed):
        _log_refusal(f"token {token.name!r} has the {token.role} role")
        raise ApiError(
            403,
            f'The token "{token.name}" has the {token.role} role: changing jobs, queues, '
            "schedules or workflows needs an operator token.",
        )
    g.api_actor = token.actor


def _log_refusal(reason: str) -> None:
    """A refused token is worth an operator's attention; the token itself is never logged."""
    current_app.logger.warning(
        "API request refused (%s): %s %s from %s", reason, request.method, request.path, request.remote_addr
    )


def current_actor() -> Actor:
    actor: Actor = g.get("api_actor", ANONYMOUS)
    return actor


def audit_data() -> dict[str, object]:
    """Audit fields for the events an API write records: the door, the token's name and the
    request's id."""
    return current_actor().event_data(SOURCE, **logs.event_fields())
