"""Error pages for the dashboard's own routes.

Blueprint-level only: the JSON API owns the app-wide handlers. Errors raised inside these
views (an unknown job, a missing CSRF token) get a page in the dashboard's layout, or a
small fragment for htmx.
"""

from __future__ import annotations

from flask import current_app, render_template
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import SQLAlchemyError
from werkzeug.exceptions import HTTPException, NotFound

from ..database import is_connection_fault
from .blueprint import bp
from .rendering import is_htmx


def _error(status: int, title: str, message: str) -> tuple[str, int]:
    template = "jobqueue/fragments/error.html" if is_htmx() else "jobqueue/error.html"
    return render_template(template, status=status, title=title, message=message), status


@bp.errorhandler(NotFound)
def not_found(error: NotFound) -> tuple[str, int]:
    return _error(404, "Not found", error.description or "There is nothing here.")


@bp.errorhandler(HTTPException)
def client_error(error: HTTPException) -> HTTPException | tuple[str, int]:
    """Any other refusal (413 body too large, 415, 400): the dashboard's page, same status."""
    if error.code is None or error.code >= 500:
        return error
    return _error(error.code, error.name, error.description or error.name)


@bp.errorhandler(CSRFError)
def csrf_failed(error: CSRFError) -> tuple[str, int]:
    return _error(
        400,
        "The form expired",
        f"The request was refused because its security token is missing or stale ({error.description}). "
        "Reload the page and try again.",
    )


@bp.errorhandler(SQLAlchemyError)
def database_unavailable(error: SQLAlchemyError) -> tuple[str, int]:
    """The database could not serve (down, restarting, failing over to a standby): 503 with a
    page that says so, never a 500; any other database error is a bug and propagates."""
    if not is_connection_fault(error):
        raise error
    current_app.logger.warning("database unavailable: %s", str(getattr(error, "orig", error)).splitlines()[0])
    return _error(
        503,
        "Database unavailable",
        "The database could not be reached (it may be restarting, or failing over to a standby). "
        "Nothing was changed by this request; reload the page in a few seconds.",
    )
