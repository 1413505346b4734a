"""Property-based fuzzing of every operation in /api/schema/ (schemathesis, in-process WSGI).

Schemathesis reads the OpenAPI document the API serves, generates requests for every
operation (valid ones, and invalid ones: wrong types, missing fields, bodies that break the
schema) and runs every built-in check on each answer: no 5xx, a documented status code,
content type and headers, a body that conforms to the documented schema, invalid input
refused with a 4xx and valid input accepted. A failure is a bug in the API or in the document it
generates: fix the code, never exclude the case.

CI runs a small, reproducible amount: ``API_FUZZ_MAX_EXAMPLES`` examples per operation (default
25) from a fixed seed. A longer fuzz, with a fresh seed on each run::

    API_FUZZ_MAX_EXAMPLES=2000 API_FUZZ_SEED=random pytest tests/api/test_schemathesis.py

A failing run prints its seed; ``API_FUZZ_SEED=<that seed>`` replays it.
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Iterator

import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from dashboard import create_app
from dashboard.api.openapi import BEARER
from dashboard.extensions import db
from tests.support.open_access import OPEN_ACCESS
from tests.support.secured import OPERATOR_TOKEN, build

MAX_EXAMPLES = int(os.environ.get("API_FUZZ_MAX_EXAMPLES", "25"))
_SEED = os.environ.get("API_FUZZ_SEED", "20260621")
SEED = random.getrandbits(64) if _SEED == "random" else int(_SEED)

# Collection happens before the session's database exists, so the document is read from an
# app that serves it without a database (building it touches none); every request of the
# fuzz goes to the session's real app, and a test below proves both serve the same document.
SCHEMA_APP_CONFIG = {
    "TESTING": True,
    "DEBUG": "false",
    "ENABLE_DEBUG_TOOLBAR": "false",
    "AUTO_MIGRATE": "false",
    "DATABASE_URL": "postgresql://unused.invalid/unused",  # never connected to
    **OPEN_ACCESS,
}
_SCHEMA_APP = create_app(SCHEMA_APP_CONFIG)


class LateWsgiApp:
    """A WSGI app whose target is set once the session's database exists.

    Schemathesis sends its auth probes (the same request without the token, then with a wrong
    one) through the schema's own transport, which is WSGI only if the schema has an app.
    """

    target: Flask | None = None

    def __call__(self, environ, start_response):
        assert self.target is not None, "the `secured` fixture sets the target"
        return self.target(environ, start_response)


SECURED_API = LateWsgiApp()

SEARCHED = [
    ("GET", "/api/jobs/"),
    ("POST", "/api/jobs/bulk-retry/"),
    ("POST", "/api/jobs/bulk-cancel/"),
    ("POST", "/api/jobs/bulk-run-now/"),
    ("POST", "/api/jobs/bulk-delete/"),
]
SEARCH_MAY_BE_REFUSED = {"expected-statuses": ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]}

# Loaded as a document rather than with `from_wsgi`: schemathesis leaves out the operation that
# served the document it loaded from, and GET /api/schema/ is one of ours to fuzz too.
schema = schemathesis.openapi.from_dict(
    _SCHEMA_APP.test_client().get("/api/schema/").get_json(),
    # The operator's token, given as the schema's bearerAuth: schemathesis sends it with every
    # case and knows it is the credential (its auth checks take it away and expect a 401).
    config=SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "auth": {"openapi": {BEARER: {"bearer": OPERATOR_TOKEN}}},
            "operations": [
                # `q` is a search with a grammar JSON Schema cannot state: a payload search for a
                # value no payload can hold (NaN, 1e999, an unpaired surrogate key) is a string
                # the schema admits and the API refuses with its documented 400 naming `q`
                # (HOSTILE_EXAMPLES below send those on purpose). Hypothesis also draws string
                # constants from this project's source, so the fuzz meets them by chance too.
                {
                    "include-method": method,
                    "include-path": path,
                    "checks": {"positive_data_acceptance": SEARCH_MAY_BE_REFUSED},
                }
                for method, path in SEARCHED
            ],
        }
    ),
)
schema.app = SECURED_API


@pytest.fixture(scope="module")
def secured(app, database_url) -> Iterator[Flask]:
    """The fuzz runs against an app with tokens configured, as production serves the API;
    schemathesis also re-sends requests without the token and expects the documented 401."""
    with build(database_url) as secured_app:
        SECURED_API.target = secured_app
        yield secured_app
        SECURED_API.target = None


@pytest.fixture(scope="module", autouse=True)
def nothing_left_behind(app) -> Iterator[None]:
    """After the fuzz: no new thread still running, no database connection still checked out."""
    threads_before = set(threading.enumerate())
    yield
    with _SCHEMA_APP.app_context():
        db.engine.dispose()  # it never connected; dispose anyway so nothing can linger
    leftover = [t for t in threading.enumerate() if t not in threads_before and t.is_alive()]
    assert leftover == []
    with app.app_context():
        assert db.engine.pool.checkedout() == 0


def test_the_fuzzed_document_is_the_one_the_app_serves(client):
    assert client.get("/api/schema/").get_json() == schema.raw_schema


def test_every_documented_operation_is_fuzzed():
    fuzzed = {(op.ok().method.upper(), op.ok().path) for op in schema.get_all_operations()}
    documented = {
        (method.upper(), path) for path, ops in schema.raw_schema["paths"].items() for method in ops
    }
    assert fuzzed == documented
    assert ("GET", "/api/schema/") in fuzzed and ("POST", "/api/jobs/bulk/") in fuzzed


@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,  # a database round trip has no business failing a property test
    database=None,  # no replay of examples saved by earlier runs: a run depends on its seed alone
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_operation_conforms_to_its_schema(case, app, secured):
    try:
        case.call_and_validate()
    except Exception as exc:
        exc.add_note(f"Replay with API_FUZZ_SEED={SEED} API_FUZZ_MAX_EXAMPLES={MAX_EXAMPLES}")
        raise


# Hostile values the generator is unlikely to draw, sent as cases of their operations so that
# every check above runs on each answer (no 5xx, a documented status and body): a payload
# search for what jsonb cannot hold, and an unpaired surrogate as a payload key.
HOSTILE_EXAMPLES = [
    ("GET", "/api/jobs/", {"query": {"q": "a=NaN"}}),
    ("GET", "/api/jobs/", {"query": {"q": "a.b=-Infinity"}}),
    ("GET", "/api/jobs/", {"query": {"q": "a=1e999"}}),
    ("GET", "/api/jobs/", {"query": {"q": '{"a": [NaN]}'}}),
    ("GET", "/api/jobs/", {"query": {"q": 'a="\\ud800"'}}),
    ("POST", "/api/jobs/bulk-retry/", {"body": {"q": "a=NaN", "dry_run": True}}),
    ("POST", "/api/jobs/bulk-cancel/", {"body": {"q": "a=Infinity", "dry_run": False}}),
    ("POST", "/api/jobs/bulk-run-now/", {"body": {"q": '{"\\udfff": 1}', "dry_run": True}}),
    ("POST", "/api/jobs/", {"body": {"type": "a", "payload": {"\ud800": 1}}}),
    ("POST", "/api/jobs/bulk/", {"body": {"jobs": [{"type": "a", "payload": {"x": {"\udfff": 1}}}]}}),
]


@pytest.mark.parametrize(
    ("method", "path", "parts"), HOSTILE_EXAMPLES, ids=[str(e[2]) for e in HOSTILE_EXAMPLES]
)
def test_hostile_examples_are_refused_as_documented(app, secured, method, path, parts):
    case = schema[path][method].Case(**parts)
    response = case.call_and_validate(headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
    assert response.status_code == 400
    assert response.json()["errors"]
