"""/api/schema/ is a valid OpenAPI 3.1 document of every route; /api/docs/ renders it offline."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from markupsafe import escape
from openapi_spec_validator import OpenAPIV31SpecValidator

from dashboard.api.cursor import Cursor
from dashboard.api.docs import prose
from dashboard.api.inputs import BULK_MAX_JOBS
from dashboard.config import API_OFFSET_MAX
from dashboard.runtime import handlers
from dashboard.runtime.handlers import registered_types
from dashboard.store.states import EVENT_TYPES, STATUSES
from tests.support.factories import make_job

from .helpers import create


@pytest.fixture
def document(client) -> dict[str, Any]:
    response = client.get("/api/schema/")
    assert response.status_code == 200
    assert response.mimetype == "application/json"
    return response.get_json()


def operations(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(path, method.upper()) for path, ops in doc["paths"].items() for method in ops}


def conforms(doc: dict[str, Any], schema: dict[str, Any], instance: Any) -> list[str]:
    """Validation errors of ``instance`` against ``schema``, whose refs point into ``doc``."""
    validator = Draft202012Validator({**schema, "components": doc["components"]})
    return [error.message for error in validator.iter_errors(instance)]


def response_schema(doc: dict[str, Any], path: str, method: str, status: int) -> dict[str, Any]:
    return doc["paths"][path][method]["responses"][str(status)]["content"]["application/json"]["schema"]


def test_document_is_valid_openapi_3(document):
    OpenAPIV31SpecValidator(document).validate()
    assert document["openapi"].startswith("3.")


def test_document_lists_exactly_the_routes_of_the_blueprint(app, document):
    routes = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint.startswith("jobqueue_api."):
            path = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", rule.rule)
            routes |= {(path, method) for method in rule.methods - {"HEAD", "OPTIONS"}}
    assert routes == operations(document)
    assert {
        ("/api/health/", "GET"), ("/api/config/", "GET"), ("/api/jobs/", "POST"), ("/api/jobs/", "GET"),
        ("/api/jobs/bulk/", "POST"),
        ("/api/jobs/{job_id}/", "GET"), ("/api/jobs/{job_id}/events/", "GET"), ("/api/job-events/", "GET"),
        ("/api/jobs/stats/", "GET"), ("/api/jobs/stats/detail/", "GET"),
        ("/api/jobs/{job_id}/retry/", "POST"), ("/api/schema/", "GET"),
        ("/api/docs/", "GET"), ("/api/ready/", "GET"),
        ("/api/jobs/bulk-retry/", "POST"), ("/api/jobs/bulk-cancel/", "POST"),
        ("/api/jobs/bulk-run-now/", "POST"), ("/api/jobs/bulk-delete/", "POST"),
        ("/api/jobs/{job_id}/", "DELETE"),
        ("/api/schedules/", "GET"), ("/api/schedules/{name}/", "GET"),
        ("/api/schedules/{name}/pause/", "POST"), ("/api/schedules/{name}/resume/", "POST"),
        ("/api/schedules/{name}/run/", "POST"),
        ("/api/queues/", "GET"), ("/api/queues/{name}/", "GET"), ("/api/queues/{name}/", "PATCH"),
        ("/api/queues/{name}/pause/", "POST"), ("/api/queues/{name}/resume/", "POST"),
        ("/api/workflows/{workflow}/", "GET"), ("/api/workflows/{workflow}/cancel/", "POST"),
        ("/api/workflows/{workflow}/retry/", "POST"),
    } == routes  # fmt: skip


def test_document_names_a_job_type_registered_after_it_was_first_built(client, job_type):
    """The document is built once per app; a handler registered later is among its examples."""
    handlers._registry.pop(job_type, None)
    first = client.get("/api/schema/").get_json()
    assert job_type not in first["components"]["schemas"]["CreateJob"]["properties"]["type"]["examples"]
    handlers.handler(job_type)(lambda context: None)
    again = client.get("/api/schema/").get_json()
    assert job_type in again["components"]["schemas"]["CreateJob"]["properties"]["type"]["examples"]


def test_document_carries_the_rules_the_code_enforces(document):
    create_body = document["components"]["schemas"]["CreateJob"]
    assert create_body["required"] == ["type"]
    assert create_body["additionalProperties"] is False
    props = create_body["properties"]
    assert props["type"]["maxLength"] == 120
    priority = props["priority"]["anyOf"][0]
    assert (priority["minimum"], priority["maximum"]) == (-32768, 32767)
    assert props["max_attempts"]["anyOf"][0]["minimum"] == 1
    assert "enum" not in props["type"]  # any type is accepted (JOB_TYPES_STRICT is off)
    assert props["type"]["examples"] == registered_types()
    available_at = props["available_at"]["anyOf"][0]
    assert (available_at["type"], available_at["format"]) == ("string", "date-time")
    assert re.fullmatch(available_at["pattern"], "2026-06-21T02:33:01.5+03:30")
    assert not re.fullmatch(available_at["pattern"], "2026-06-21T02:33:01")  # naive
    assert not re.fullmatch(available_at["pattern"], "9999-06-21T02:33:01Z")  # past the last year
    params = {p["name"]: p for p in document["paths"]["/api/jobs/"]["get"]["parameters"]}
    assert set(params) == {"limit", "offset", "status", "type", "queue", "q", "cancelled"}
    assert params["limit"]["schema"]["default"] == 25
    assert (params["offset"]["schema"]["minimum"], params["offset"]["schema"]["maximum"]) == (
        0,
        API_OFFSET_MAX,
    )
    status_ref = params["status"]["schema"]["anyOf"][0]["$ref"].rsplit("/", 1)[-1]
    assert document["components"]["schemas"][status_ref]["enum"] == list(STATUSES)
    feed = {p["name"]: p for p in document["paths"]["/api/job-events/"]["get"]["parameters"]}
    assert set(feed) == {"limit", "cursor", "type", "exclude", "job_id"}
    assert re.fullmatch(feed["cursor"]["schema"]["anyOf"][0]["pattern"], Cursor("before", 42).encode())
    assert all(p["allowEmptyValue"] for p in [*params.values(), *feed.values()])  # `?status=`: no filter
    assert feed["limit"]["schema"]["default"] == 50
    event_ref = feed["type"]["schema"]["items"]["$ref"].rsplit("/", 1)[-1]
    assert document["components"]["schemas"][event_ref]["enum"] == list(EVENT_TYPES)
    # several types: repeated (`?type=a&type=b`); exclude: comma-separated (`?exclude=a,b`)
    assert (feed["type"]["style"], feed["type"]["explode"]) == ("form", True)
    assert (feed["exclude"]["style"], feed["exclude"]["explode"]) == ("form", False)
    assert feed["exclude"]["schema"]["items"]["$ref"] == feed["type"]["schema"]["items"]["$ref"]
    assert "x-explode" not in json.dumps(document)
    detail = document["paths"]["/api/jobs/{job_id}/"]["get"]
    assert detail["parameters"][0] == {
        "name": "job_id", "in": "path", "required": True, "schema": {"type": "string", "format": "uuid"}
    }  # fmt: skip
    assert set(detail["responses"]) == {"200", "401", "404", "503"}
    assert set(document["paths"]["/api/jobs/"]["post"]["responses"]) == {
        "200", "201", "400", "401", "403", "413", "415", "503"
    }  # fmt: skip
    assert set(document["paths"]["/api/jobs/{job_id}/retry/"]["post"]["responses"]) == {
        "200", "401", "403", "404", "409", "503"
    }  # fmt: skip
    bulk = document["paths"]["/api/jobs/bulk/"]["post"]
    assert set(bulk["responses"]) == {"200", "201", "400", "401", "403", "413", "415", "503"}
    jobs = document["components"]["schemas"]["BulkCreateJobs"]["properties"]["jobs"]
    assert (jobs["minItems"], jobs["maxItems"]) == (1, BULK_MAX_JOBS)
    assert jobs["items"] == {"$ref": "#/components/schemas/BulkCreateJob"}  # CreateJob's, with indexes
    bulk_item = document["components"]["schemas"]["BulkCreateJob"]
    assert set(bulk_item["properties"]) == set(create_body["properties"])


def test_real_responses_conform_to_the_documented_schemas(client, document, job_type):
    job = create(client, job_type, payload={"a": 1}, idempotency_key="k")
    failed = make_job("failed")
    running = make_job("running")
    checks = [
        ("/api/jobs/", "post", 201, client.post("/api/jobs/", json={"type": job_type})),
        (
            "/api/jobs/",
            "post",
            200,
            client.post("/api/jobs/", json={"type": job_type, "idempotency_key": "k"}),
        ),
        ("/api/jobs/", "post", 400, client.post("/api/jobs/", json={"type": 1})),
        ("/api/jobs/", "post", 415, client.post("/api/jobs/", data="x")),
        ("/api/jobs/bulk/", "post", 201, client.post("/api/jobs/bulk/", json={"jobs": [{"type": job_type}]})),
        (
            "/api/jobs/bulk/",
            "post",
            200,
            client.post("/api/jobs/bulk/", json={"jobs": [{"type": job_type, "idempotency_key": "k"}]}),
        ),
        ("/api/jobs/bulk/", "post", 400, client.post("/api/jobs/bulk/", json={"jobs": [{"type": 1}]})),
        ("/api/jobs/", "get", 200, client.get("/api/jobs/?limit=1")),
        ("/api/jobs/{job_id}/", "get", 200, client.get(f"/api/jobs/{running.id}/")),
        ("/api/jobs/{job_id}/", "get", 404, client.get(f"/api/jobs/{uuid.uuid4()}/")),
        ("/api/jobs/{job_id}/events/", "get", 200, client.get(f"/api/jobs/{job['id']}/events/")),
        ("/api/job-events/", "get", 200, client.get("/api/job-events/?limit=1")),
        ("/api/jobs/stats/", "get", 200, client.get("/api/jobs/stats/")),
        ("/api/jobs/{job_id}/retry/", "post", 200, client.post(f"/api/jobs/{failed.id}/retry/")),
        ("/api/jobs/{job_id}/retry/", "post", 409, client.post(f"/api/jobs/{running.id}/retry/")),
        ("/api/health/", "get", 200, client.get("/api/health/")),
        ("/api/config/", "get", 200, client.get("/api/config/")),
    ]
    for path, method, status, response in checks:
        assert response.status_code == status, (path, method)
        errors = conforms(document, response_schema(document, path, method, status), response.get_json())
        assert errors == [], (path, method, status, errors)


def test_docs_page_renders_every_operation_without_external_assets(client, document):
    response = client.get("/api/docs/")
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    page = response.get_data(as_text=True)
    for path, ops in document["paths"].items():
        assert f"<code>{path}</code>" in page
        for op in ops.values():
            assert f'id="{op["operationId"]}"' in page
            assert str(escape(op["summary"])) in page
    for name in document["components"]["schemas"]:
        assert f'id="schema-{name}"' in page
    assert "<script" not in page
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert "``" not in page  # docstrings' ``code`` is set as code, not shown with its backticks
    assert "<code>JOB_PAGE_SIZE</code>" in page


def test_docs_prose_sets_single_and_double_backticks_as_code_and_escapes_the_rest():
    text = prose('``{"ok": false}`` or `limit` <b>, not ``a`b``')
    assert text == "<code>{&#34;ok&#34;: false}</code> or <code>limit</code> &lt;b&gt;, not <code>a`b</code>"


def test_strict_mode_publishes_the_registered_types_as_an_enum(app, client, strict_job_types):
    document = client.get("/api/schema/").get_json()
    assert document["components"]["schemas"]["CreateJob"]["properties"]["type"]["enum"] == registered_types()


def test_the_reads_a_replica_may_serve_document_where_they_were_read(client, document):
    replica_reads = {
        ("/api/jobs/", "get"),
        ("/api/jobs/stats/", "get"),
        ("/api/jobs/stats/detail/", "get"),
        ("/api/job-events/", "get"),
    }
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            for status, response in op["responses"].items():
                headers = response.get("headers", {})
                if (path, method) in replica_reads and status == "200":
                    assert set(headers) == {"X-Read-From", "X-Replica-Lag-Seconds"}, path
                    assert not any(header["required"] for header in headers.values())
                    assert "replica" in headers["X-Read-From"]["schema"]["enum"]
                else:
                    assert headers == {}, (path, method, status)
    page = client.get("/api/docs/").get_data(as_text=True)
    assert page.count("Header <code>X-Read-From</code>") == len(replica_reads)
