"""The route registry: one declaration per endpoint drives both validation and the OpenAPI document.

``@api_route`` registers a view on the blueprint and records what it accepts (query model,
body model) and answers (status -> model). The wrapper validates with exactly those models
before the view runs, and :mod:`.openapi` builds ``/api/schema/`` from the same records, so
the document describes what the code enforces and nothing is kept in sync by hand.
"""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, current_app, request
from pydantic import BaseModel, ValidationError
from werkzeug.datastructures import MultiDict

from ..config import settings_of
from ..config.rules import finite_float, reject_constant
from ..store import reading
from .access import OPEN_ENDPOINTS, READ_METHODS
from .errors import ApiError, validation_error
from .inputs import body_context
from .outputs import Error

BODY_FIELD = "body"  # the key of errors about the body as a whole


@dataclass(frozen=True)
class Reply:
    """One documented response: status, description, and the model of its JSON body."""

    description: str
    model: type[BaseModel] | None = None
    media_type: str = "application/json"
    schema: dict[str, Any] | None = None  # for a body that no model describes (the docs page)


@dataclass(frozen=True)
class Endpoint:
    name: str
    rule: str
    method: str
    view: Callable[..., Any]
    summary: str
    query: type[BaseModel] | None
    body: type[BaseModel] | None
    replies: dict[int, Reply] = field(default_factory=dict)
    tag: str = "jobs"

    @property
    def endpoint(self) -> str:
        return f"jobqueue_api.{self.name}"

    @property
    def open(self) -> bool:
        """Served without a token (health check, schema, docs)."""
        return self.endpoint in OPEN_ENDPOINTS

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.view.__doc__ or "")


class Registry:
    def __init__(self, bp: Blueprint) -> None:
        self.bp = bp
        self.endpoints: list[Endpoint] = []

    def route(
        self,
        rule: str,
        method: str,
        *,
        summary: str,
        replies: Mapping[int, Reply],
        query: type[BaseModel] | None = None,
        body: type[BaseModel] | None = None,
        tag: str = "jobs",
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register ``view`` at ``rule``; it receives ``query=`` / ``body=`` already validated."""

        def decorate(view: Callable[..., Any]) -> Callable[..., Any]:
            @functools.wraps(view)
            def dispatch(**path_args: Any) -> Any:
                kwargs = dict(path_args)
                if query is not None:
                    values = query_values(request.args, query)
                    kwargs["query"] = validate(query, values, whole=repeated_fields(query))
                if body is not None:
                    kwargs["body"] = validate(body, read_json_body(), context=body_context())
                return under_read_timeout(view, kwargs)

            self.bp.add_url_rule(rule, endpoint=view.__name__, view_func=dispatch, methods=[method])
            implied = implied_replies(rule, query, body, access=access_replies(view.__name__, method))
            all_replies = {**implied, **dict(replies)}  # an endpoint's own words win
            self.endpoints.append(
                Endpoint(view.__name__, rule, method, view, summary, query, body, all_replies, tag)
            )
            return view

        return decorate


READ_TIMEOUT_DETAIL = (
    "The request's database read ran past the statement timeout (DASHBOARD_QUERY_TIMEOUT_MS = {ms} ms) "
    "and was cancelled, so nothing was answered. Narrow it (a status, a type, a search, a smaller "
    "limit or offset) or try again when the database is less busy."
)


def under_read_timeout(view: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """Run ``view`` with its reads under ``DASHBOARD_QUERY_TIMEOUT_MS``, as the pages' reads are
    (``store.read_timeout``: reads only, never a write); a read that runs past it is a 503
    saying so, and costs the database no more than that."""
    limit = settings_of(current_app).dashboard_query_timeout_ms
    try:
        with reading.time_limit(limit):
            return view(**kwargs)
    except reading.QueryTimeout:
        raise ApiError(503, READ_TIMEOUT_DETAIL.format(ms=limit)) from None


def access_replies(name: str, method: str) -> dict[int, Reply]:
    """401/403 for the endpoints a token guards (see :mod:`.access`)."""
    if f"jobqueue_api.{name}" in OPEN_ENDPOINTS:
        return {}
    replies = {401: Reply("Missing, malformed or unknown bearer token (when tokens are configured).", Error)}
    if method not in READ_METHODS:
        replies[403] = Reply("The token's role is viewer: writes need an operator token.", Error)
    replies[503] = Reply(
        "A database read ran past DASHBOARD_QUERY_TIMEOUT_MS (`detail` says how to narrow the request), "
        "or the database is unavailable.",
        Error,
    )
    return replies


def implied_replies(
    rule: str,
    query: type[BaseModel] | None,
    body: type[BaseModel] | None,
    access: dict[int, Reply] | None = None,
) -> dict[int, Reply]:
    """The error responses that follow from what an endpoint accepts and who may call it."""
    replies: dict[int, Reply] = dict(access or {})
    if query is not None or body is not None:
        replies[400] = Reply("Invalid input: `errors` names each field.", Error)
    if "<" in rule:
        replies[404] = Reply("No job with this id (or the id is not a UUID).", Error)
    if body is not None:
        replies[413] = Reply("Body larger than MAX_CONTENT_LENGTH.", Error)
        replies[415] = Reply("Body is not application/json.", Error)
    return replies


def query_values(args: MultiDict[str, str], model: type[BaseModel] | None = None) -> dict[str, Any]:
    """First value of each parameter; an empty value is the same as an absent one. A field of
    ``model`` typed as a list (:func:`repeated_fields`) gets every non-empty value instead."""
    repeated = repeated_fields(model) if model is not None else frozenset()
    values: dict[str, Any] = {}
    for key in args:
        if key in repeated:
            given = [value for value in args.getlist(key) if value != ""]
            if given:
                values[key] = given
        elif (value := args.get(key, "")) != "":
            values[key] = value
    return values


def repeated_fields(model: type[BaseModel]) -> frozenset[str]:
    """The query fields a client may repeat (``?type=a&type=b``): those typed as a list."""
    return frozenset(
        name for name, info in model.model_fields.items() if typing.get_origin(info.annotation) is list
    )


def validate(
    model: type[BaseModel],
    data: Any,
    whole: frozenset[str] = frozenset(),
    context: dict[str, Any] | None = None,
) -> Any:
    """``model`` from ``data``, else a 400. Errors about an item of a field in ``whole`` (a
    repeated query parameter: ``type.1``) are reported under the field's name (``type``).
    ``context``: pydantic's validation context (:func:`.inputs.body_context`)."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        errors: dict[str, list[str]] = {}
        for loc, messages in errors_by_field(exc).items():
            name = loc.split(".", 1)[0]
            errors.setdefault(name if name in whole else loc, []).extend(messages)
        raise validation_error(errors) from None


def errors_by_field(exc: ValidationError) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for error in exc.errors(include_url=False, include_input=False):
        loc = ".".join(str(part) for part in error["loc"]) or BODY_FIELD
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message = "Unknown field."
        errors.setdefault(loc, []).append(message)
    return errors


def read_json_body() -> Any:
    """The request body as JSON: UTF-8, strict syntax, finite numbers; else 400/413/415."""
    if request.mimetype != "application/json":
        shown = request.mimetype or "none"
        raise ApiError(415, f'Unsupported media type "{shown}": send application/json.')
    raw = request.get_data(cache=True)  # over MAX_CONTENT_LENGTH: werkzeug raises 413
    try:
        text = raw.decode("utf-8")
        return json.loads(text, parse_float=finite_float, parse_constant=reject_constant)
    except UnicodeDecodeError:
        reason = "body is not valid UTF-8"
    except RecursionError:
        reason = "nested too deeply"
    except ValueError as exc:  # JSONDecodeError, over-long integers, non-finite numbers
        reason = str(exc).split("\n")[0]
    raise validation_error({BODY_FIELD: [f"Malformed JSON: {reason}."]}, detail="Malformed JSON body.")
