"""``GET /api/ready/``: readiness for load balancers and orchestrators.

200 only when the database answers *and* its schema is this code's migration head (or a newer
one a rolling deploy already applied, see ``ops.schema``); 503 otherwise, with the reason
(the database driver's message only in development, ``DEBUG``; it is always logged).
Open like ``/api/health/`` (``access.OPEN_ENDPOINTS``).
"""

from __future__ import annotations

from typing import Literal

from flask import Response, current_app
from pydantic import BaseModel, Field
from sqlalchemy.exc import SQLAlchemyError

from ..config import settings_of
from ..ops import schema
from ..runtime.failures import first_line
from .blueprint import routes
from .registry import Reply


class Ready(BaseModel):
    ready: bool
    database: Literal["ok", "error"]
    schema_: Literal["current", "behind", "ahead", "unknown"] = Field(alias="schema")
    revision: str | None = Field(description="The database's migration revision (null: none or unknown).")
    head: str = Field(description="This code's migration head.")
    reason: str


def _answer(body: Ready, status: int) -> Response:
    return current_app.response_class(
        body.model_dump_json(by_alias=True), status=status, mimetype="application/json"
    )


@routes.route(
    "/ready/",
    "GET",
    summary="Readiness: the database answers and the schema is at the migration head",
    tag="ops",
    replies={
        200: Reply("Ready to serve.", Ready),
        503: Reply("The database is unreachable or its schema is behind this code.", Ready),
    },
)
def ready() -> Response:
    """200 when the database answers and ``alembic_version`` is at this code's head (or newer);
    503 with the reason otherwise (unreachable, or a migration to run)."""
    head = schema.script_head()
    try:
        state = schema.current_state()
    except SQLAlchemyError as exc:
        current_app.logger.warning("Readiness: database unreachable: %s", first_line(exc))
        # An open endpoint: the driver's message (host, port) only in development, as /health/.
        detail = f": {first_line(exc)}" if settings_of(current_app).debug else ""
        reason = f"database unreachable{detail}"
        body = Ready(ready=False, database="error", schema="unknown", revision=None, head=head, reason=reason)
        return _answer(body, 503)
    body = Ready(
        ready=state.ready,
        database="ok",
        schema=state.state,
        revision=state.database,
        head=head,
        reason=state.reason(),
    )
    return _answer(body, 200 if state.ready else 503)
