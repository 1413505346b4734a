"""What every fenced transition binds: the owner's guard and the statement's clock."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from ..values import aware


def owner(job_id: uuid.UUID, worker_id: str, attempt: int) -> dict[str, Any]:
    """The guard of a fenced statement: this job, owned by this worker, in this attempt."""
    return {"id": job_id, "worker_id": worker_id, "attempt": attempt}


def given_now(now: datetime | None) -> datetime | None:
    """A worker-side statement's ``:now``: the caller's time, checked, or ``None`` for the
    database's clock when the statement runs (claim.sql)."""
    return None if now is None else aware(now, "now")
