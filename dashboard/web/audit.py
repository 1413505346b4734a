"""The audit log page: deleted jobs and removed worker rows, newest first (``store/audit.py``).
Viewers may read it, as every page; the entries name who acted, never a credential's secret."""

from __future__ import annotations

from flask import request

from ..config.rules import BIGINT_MAX
from ..store import audit
from .blueprint import bp
from .params import _int
from .rendering import page_or_fragment


@bp.get("/audit/")
def audit_log() -> str:
    errors: dict[str, str] = {}
    before = _int(request.args, "before", errors, minimum=1, maximum=BIGINT_MAX)
    page = audit.page(before=before) if not errors else audit.AuditPage([], None)
    return page_or_fragment(
        "jobqueue/audit.html", "jobqueue/fragments/audit.html", page=page, errors=errors, before=before
    )
