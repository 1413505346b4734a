"""Every failure under ``/api/`` answers JSON: ``{"detail": ...}``, plus ``errors`` on a 400.

Scripts parse API responses; an HTML error page (or a traceback) would break them. The
handlers are registered app-wide because unknown ``/api/...`` URLs and wrong methods never
reach the blueprint, but they only shape responses for ``/api/`` paths: any other path gets
the exception back unchanged, so the dashboard's own handlers and Flask's defaults apply.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from flask import Blueprint, Flask, Response, current_app, request
from flask.blueprints import BlueprintSetupState
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound, RequestEntityTooLarge
from werkzeug.wrappers import Response as WerkzeugResponse

from ..database import is_connection_fault
from ..mount import mount_of


class ApiError(Exception):
    """A client error with its status, message and (for 400) the offending fields."""

    def __init__(
        self,
        code: int,
        detail: str,
        errors: Mapping[str, Sequence[str]] | None = None,
        headers: Mapping[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.errors = {k: list(v) for k, v in errors.items()} if errors else None
        self.headers = dict(headers or {})
        self.extra = extra


def validation_error(errors: Mapping[str, Sequence[str]], detail: str = "Invalid input.") -> ApiError:
    return ApiError(400, detail, errors)


def error_body(detail: str, errors: Mapping[str, list[str]] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"detail": detail, **extra}
    if errors:
        body["errors"] = dict(errors)
    return body


def json_error(
    code: int, detail: str, errors: Mapping[str, list[str]] | None = None, **extra: Any
) -> Response:
    return current_app.response_class(
        json.dumps(error_body(detail, errors, **extra)),
        status=code,
        mimetype="application/json",
    )


def is_api_request() -> bool:
    return mount_of(current_app).is_api_path(request.path)


def _http_detail(exc: HTTPException) -> str:
    if isinstance(exc, NotFound):
        return "Not found."
    if isinstance(exc, MethodNotAllowed):
        return f'Method "{request.method}" not allowed.'
    if isinstance(exc, RequestEntityTooLarge):
        limit = current_app.config.get("MAX_CONTENT_LENGTH")
        return f"Request body too large (limit {limit} bytes)."
    return exc.description or exc.name


def handle_api_error(exc: ApiError) -> Response:
    response = json_error(exc.code, exc.detail, exc.errors, **exc.extra)
    response.headers.update(exc.headers)
    return response


def handle_http_exception(exc: HTTPException) -> HTTPException | WerkzeugResponse:
    """JSON for ``/api/`` paths, keeping the status and headers (``Allow`` on a 405)."""
    if not is_api_request() or exc.code is None:
        return exc
    response = exc.get_response()
    response.set_data(json.dumps(error_body(_http_detail(exc))))
    response.mimetype = "application/json"
    return response


def handle_unexpected(exc: Exception) -> Response:
    """A bug or an outage: log it, answer JSON without a traceback; elsewhere, re-raise."""
    if not is_api_request():
        raise exc
    if is_connection_fault(exc):  # down, restarting, failing over: the client may try again
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()
        current_app.logger.warning(
            "database unavailable on %s %s: %s", request.method, request.path, first[0] if first else exc
        )
        return json_error(503, "Database unavailable.")
    current_app.logger.exception("Unhandled error on %s %s", request.method, request.path)
    return json_error(500, "Internal server error.")


HANDLERS = (
    (ApiError, handle_api_error),
    (HTTPException, handle_http_exception),
    (Exception, handle_unexpected),
)


def register(bp: Blueprint) -> None:
    """JSON errors for the API's views, and for every path under the API's prefix too: a URL
    that matches no route belongs to no blueprint. In the standalone app the handlers are
    app-wide; a host's app keeps its own error handlers, and the API's prefix gets a last,
    catch-all route of its own (:func:`unknown_path`) instead."""
    for kind, handle in HANDLERS:
        bp.register_error_handler(kind, handle)

    def app_wide(state: BlueprintSetupState) -> None:
        if not mount_of(state.app).embedded:
            for kind, handle in HANDLERS:
                state.app.register_error_handler(kind, handle)
            return
        for rule in ("/", "/<path:rest>"):
            state.add_url_rule(rule, UNKNOWN_PATH, unknown_path, methods=ANY_METHOD)

    bp.record(app_wide)


UNKNOWN_PATH = "unknown_path"
ANY_METHOD = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def unknown_path(rest: str = "") -> Response:
    """Under a host's mount, a path below the API's prefix that no API route serves: 404 (or
    405 with ``Allow`` when a route serves that path with other methods), as JSON. Werkzeug
    tries this rule last (a path converter), so every real route and its trailing-slash
    redirect win."""
    adapter = current_app.url_map.bind_to_environ(request.environ)
    allowed = set()
    for method in ANY_METHOD:
        try:
            endpoint, _ = adapter.match(request.path, method=method)
        except HTTPException:
            continue
        if not endpoint.endswith("." + UNKNOWN_PATH):
            allowed.add(method)
    if allowed:
        raise MethodNotAllowed(valid_methods=sorted(allowed | {"OPTIONS"}))
    raise NotFound()


def install_cors(app: Flask, origins: Sequence[str], *, development: bool) -> None:
    """CORS on the API's paths only (``/api/*``, under the mount's prefix): the configured
    origins, plus localhost origins (any port) in
    development. With neither (production's default) no CORS header is ever sent."""
    from flask_cors import CORS

    from ..config import DEV_CORS_ORIGIN

    allowed: list[Any] = list(origins)
    if development:
        allowed.append(DEV_CORS_ORIGIN)
    if allowed:
        CORS(app, resources={rf"{mount_of(app).api_prefix}/*": {"origins": allowed}})
