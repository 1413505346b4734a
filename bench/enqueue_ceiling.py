"""The stack's own ceiling for ``POST /api/jobs/``: Flask and psycopg with nothing else.

``app`` is a Flask app with one ``POST /api/jobs/`` route (and ``GET /api/health/``, which the
benchmark's client waits for): it parses the JSON body, runs the product's create statement
with its ``created`` event (``create`` from the store's loader, ``dashboard/store/sql.py``,
compiled for psycopg: the very statement the product sends) with the parameters the product
passes for a plain job (``spec.row_params``), on one autocommit psycopg connection per thread,
and answers 201 with a small JSON body. No validation beyond the body being JSON with a
``type``, no access control, no audit fields but the door, no logging, no record decoding:
what a create through this web stack costs at least.

:func:`compare` serves it with gunicorn exactly as the product is served (``bench.api_enqueue``:
the Procfile's command, ``gunicorn.conf.py``, access log off, one keep-alive client) and
measures it against ``POST /api/jobs/``, alternating which goes first, in the same run.
"""

from __future__ import annotations

import os
import threading
from datetime import UTC, datetime
from typing import Any

import psycopg
from flask import Flask, request
from psycopg.types.json import Jsonb
from sqlalchemy.dialects import postgresql

from dashboard.store.lifecycle.spec import JobSpec, row_params
from dashboard.store.sql import STATEMENTS

from . import api_enqueue
from .db import libpq

_CREATE = STATEMENTS["create"]
_COMPILED = _CREATE.clause.compile(dialect=postgresql.psycopg.dialect())  # type: ignore[no-untyped-call]
SQL = str(_COMPILED)  # the statement with psycopg's %(name)s placeholders
FIXED = {name: value for name, value in _COMPILED.params.items() if value is not None}  # notify_channel
JSONB = _CREATE.jsonb  # payload, event_data
EVENT_DATA = {"source": "api"}  # the door; the product adds the actor and the request id

app = Flask(__name__)
_local = threading.local()


def _connection() -> psycopg.Connection[Any]:
    conn: psycopg.Connection[Any] | None = getattr(_local, "conn", None)
    if conn is None or conn.closed:
        conn = _local.conn = psycopg.connect(libpq(os.environ["DATABASE_URL"]), autocommit=True)
    return conn


@app.get("/api/health/")
def health() -> dict[str, bool]:
    return {"ok": True}


@app.post("/api/jobs/")
def create() -> tuple[dict[str, str], int]:
    body = request.get_json()
    spec = JobSpec(type=body["type"], payload=body.get("payload"))
    params = row_params(spec, EVENT_DATA, datetime.now(UTC))
    args = {name: Jsonb(value) if name in JSONB else value for name, value in params.items()}
    row = _connection().execute(SQL, {**args, **FIXED}).fetchone()
    assert row is not None  # no idempotency key: the insert cannot conflict
    return {"id": str(row[0]), "status": "queued"}, 201


def compare(url: str, *, jobs: int, runs: int) -> dict[str, list[float]]:
    """``runs`` pairs, one keep-alive client each: jobs/s of ``POST /api/jobs/`` (``product``)
    and of this app (``minimal``), the first of each pair alternating, each pair's ratio, and
    the web server's CPU per job of each run in µs (``product_cpu``, ``minimal_cpu``)."""
    got: dict[str, list[float]] = {key: [] for key in ("product", "minimal", "product_cpu", "minimal_cpu")}
    apps = {"product": "wsgi:app", "minimal": "bench.enqueue_ceiling:app"}
    for n in range(runs):
        for which in ("product", "minimal") if n % 2 == 0 else ("minimal", "product"):
            got[which].append(api_enqueue.single(url, jobs=jobs, app=apps[which], cpu=got[f"{which}_cpu"]))
    got["ratios"] = [p / m for p, m in zip(got["product"], got["minimal"], strict=True)]
    return got
