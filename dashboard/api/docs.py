"""``/api/schema/`` (the OpenAPI document) and ``/api/docs/`` (the same document, readable).

The docs page is rendered on the server from the generated document: no JavaScript, no CDN,
so it works offline and cannot disagree with the schema.
"""

from __future__ import annotations

import json
import re
from typing import Any

from flask import Response, current_app, render_template
from markupsafe import Markup, escape

from ..config import settings_of
from ..mount import EXTENSION, static_url
from ..runtime.handlers import registered_types
from .blueprint import routes
from .openapi import build_document
from .registry import Reply

route = routes.route
_BACKTICKS = re.compile(r"``(.+?)``|`([^`]+)`")  # ``code`` (docstring style) or `code`


@route(
    "/schema/",
    "GET",
    summary="OpenAPI document",
    tag="ops",
    replies={200: Reply("This API as OpenAPI 3.1 JSON.", schema={"type": "object"})},
)
def schema() -> Response:
    """The OpenAPI 3.1 document, generated from the definitions the API validates with."""
    return current_app.response_class(_built()[1], mimetype="application/json")


@route(
    "/docs/",
    "GET",
    summary="API documentation page",
    tag="ops",
    replies={
        200: Reply(
            "An HTML page rendered from the OpenAPI document.",
            media_type="text/html",
            schema={"type": "string"},
        )
    },
)
def docs() -> str:
    """This documentation: the OpenAPI document rendered as HTML, readable without JavaScript."""
    return render_template(
        "jobqueue/api/docs.html", doc=_built()[0], type_of=type_of, prose=prose, queue_static=static_url
    )


def _built() -> tuple[dict[str, Any], str]:
    """This app's OpenAPI document and its JSON text, built on first use and again only when
    the app's settings are replaced or a job type is registered: it depends on nothing else
    (the routes' definitions, the settings' bounds, the registered types as the examples of a
    job's type), so it is not rebuilt on every request. Read only."""
    settings = settings_of(current_app)
    types = tuple(registered_types())
    state = current_app.extensions[EXTENSION]
    built = state.openapi
    if built is None or built[0] is not settings or built[1] != types:
        document = build_document(current_app, routes)
        built = state.openapi = (settings, types, document, json.dumps(document, indent=2))
    return built[2], built[3]


def prose(text: str | None) -> Markup:
    """Escaped text with its `backticked` (or ``double-backticked``) words set as code, the one
    markdown the document uses."""
    code = _BACKTICKS.sub(lambda m: f"<code>{m.group(1) or m.group(2)}</code>", str(escape(text or "")))
    return Markup(code)


def type_of(schema: dict[str, Any] | None) -> str:
    """A short, human reading of a JSON Schema: ``integer (1..100)``, ``Job | null``, ..."""
    if not schema:
        return "any JSON"
    if "$ref" in schema:
        ref: str = schema["$ref"]
        return ref.rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(type_of(option) for option in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(json.dumps(value) for value in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"])
    kind = schema.get("type", "any JSON")
    if isinstance(kind, list):
        kind = " | ".join(kind)
    if kind == "array":
        return f"array of {type_of(schema.get('items'))}"
    if kind == "object" and "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return f"object of {type_of(extra) if isinstance(extra, dict) else 'any JSON'}"
    text = f"{kind} ({schema['format']})" if "format" in schema else str(kind)
    bounds = [
        f"{label} {schema[key]}"
        for key, label in (
            ("minimum", ">="),
            ("maximum", "<="),
            ("minLength", "length >="),
            ("maxLength", "length <="),
        )
        if key in schema
    ]
    return f"{text}, {', '.join(bounds)}" if bounds else text
