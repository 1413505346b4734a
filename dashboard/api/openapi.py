"""The OpenAPI 3.1 document, generated from the route registry and its pydantic models.

Paths come from the app's URL map (so the document lists the routes that really exist),
parameters and bodies from the models the registry validates with, responses from the models
the views serialise with. Nothing here describes a shape by hand.
"""

from __future__ import annotations

import re
from typing import Any

from flask import Flask
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from ..config.rules import QUEUE_NAME_PATTERN, SCHEDULE_NAME_PATTERN, TYPE_PATTERN, WORKFLOW_MAX_LENGTH
from .fields import COMPONENTS
from .read_source import HEADER_DOCS, REPLICA_VIEWS
from .registry import Endpoint, Registry

REF_TEMPLATE = "#/components/schemas/{model}"
BEARER = "bearerAuth"
_CONVERTER = re.compile(r"<(?:(\w+):)?(\w+)>")
_PATH_PARAM_SCHEMAS = {"uuid": {"type": "string", "format": "uuid"}, "int": {"type": "integer"}}
# Path parameters by the segment before them and their name: a queue's or a schedule's name is
# published with its own pattern (api/queues.py, api/schedules.py, api/workflows.py).
_NAMED_PARAM_SCHEMAS: dict[tuple[str, str], dict[str, object]] = {
    ("queues", "name"): {"type": "string", "pattern": QUEUE_NAME_PATTERN},
    ("schedules", "name"): {"type": "string", "pattern": SCHEDULE_NAME_PATTERN},
    ("workflows", "workflow"): {
        "type": "string",
        "minLength": 1,
        "maxLength": WORKFLOW_MAX_LENGTH,
        "pattern": TYPE_PATTERN,
    },
}

INFO = {
    "title": "Job queue API",
    "version": "1.0.0",
    "description": (
        "Create, inspect and retry jobs of the PostgreSQL job queue. Errors are JSON: "
        '`{"detail": "..."}`, plus `errors` (field -> messages) on 400. Timestamps are ISO 8601 '
        "with the offset of TIME_ZONE. Authentication: `Authorization: Bearer <token>` with a "
        "token from API_TOKENS; reads need a viewer (or operator) token, writes (every method "
        "but GET: jobs, queues, schedules, workflows) an operator token. The health check, this "
        "schema and its docs page are open. In development with no credential configured, no token is needed."
    ),
}


def openapi_path(rule: str) -> tuple[str, list[dict[str, Any]]]:
    """A Werkzeug rule as an OpenAPI path template, with its path parameters."""
    params = []
    for found in _CONVERTER.finditer(rule):
        converter, name = found.groups()
        collection = rule[: found.start()].rstrip("/").rsplit("/", 1)[-1]  # the segment before it
        schema = (
            _PATH_PARAM_SCHEMAS.get(converter or "")
            or _NAMED_PARAM_SCHEMAS.get((collection, name))
            or {"type": "string"}
        )
        params.append({"name": name, "in": "path", "required": True, "schema": dict(schema)})
    return _CONVERTER.sub(r"{\2}", rule), params


def _models(endpoints: list[Endpoint]) -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    seen: dict[tuple[type[BaseModel], JsonSchemaMode], None] = {}
    for ep in endpoints:
        if ep.body is not None:
            seen[(ep.body, "validation")] = None
        for reply in ep.replies.values():
            if reply.model is not None:
                seen[(reply.model, "serialization")] = None
    return list(seen)


def query_parameters(model: type[BaseModel], components: dict[str, Any]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template=REF_TEMPLATE, mode="validation")
    components.update(schema.get("$defs", {}))
    required = set(schema.get("required", []))
    params = []
    for name, prop in schema["properties"].items():
        prop = dict(prop)
        description = prop.pop("description", None)
        prop.pop("title", None)
        explode = prop.pop("x-explode", None)
        param: dict[str, Any] = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if prop.get("type") == "array":
            # form style: repeated (`?type=a&type=b`), or comma-separated when explode is false
            param["style"], param["explode"] = "form", explode is not False
        if name not in required:
            # The registry reads `?status=` as no filter (as a blank form field is): say so, or
            # a client would expect a 400 for the empty value that the schema does not admit.
            param["allowEmptyValue"] = True
        if description:
            param["description"] = description
        params.append(param)
    return params


def build_document(app: Flask, routes: Registry) -> dict[str, Any]:
    rules = {rule.endpoint: rule for rule in app.url_map.iter_rules()}
    refs, top = models_json_schema(_models(routes.endpoints), ref_template=REF_TEMPLATE)
    components: dict[str, Any] = {**top.get("$defs", {}), **COMPONENTS}
    paths: dict[str, dict[str, Any]] = {}
    for ep in routes.endpoints:
        path, path_params = openapi_path(rules[ep.endpoint].rule)
        operation: dict[str, Any] = {
            "operationId": ep.name,
            "summary": ep.summary,
            "description": ep.description,
            "tags": [ep.tag],
            "responses": {},
        }
        if ep.open:
            operation["security"] = []
        params = path_params + (query_parameters(ep.query, components) if ep.query else [])
        if params:
            operation["parameters"] = params
        if ep.body is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": refs[(ep.body, "validation")]}},
            }
        for status, reply in sorted(ep.replies.items()):
            response: dict[str, Any] = {"description": reply.description}
            schema = refs[(reply.model, "serialization")] if reply.model is not None else reply.schema
            if schema is not None:
                response["content"] = {reply.media_type: {"schema": schema}}
            if ep.view in REPLICA_VIEWS and 200 <= status < 300:
                response["headers"] = {name: dict(header) for name, header in HEADER_DOCS.items()}
            operation["responses"][str(status)] = response
        paths.setdefault(path, {})[ep.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": INFO,
        "tags": [
            {"name": "jobs", "description": "Jobs and their events."},
            {"name": "ops", "description": "Health, configuration and this documentation."},
            {"name": "queues", "description": "Named queues: figures, pause, resume, limits."},
            {"name": "schedules", "description": "Recurring jobs declared in code: state, pause, run now."},
            {"name": "workflows", "description": "Jobs that wait for others: a workflow, cancel, retry."},
        ],
        "paths": paths,
        "security": [{BEARER: []}],
        "components": {
            "schemas": components,
            "securitySchemes": {
                BEARER: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A token from API_TOKENS (`flask --app wsgi new-token` makes one).",
                }
            },
        },
    }
