"""What a row of a job list carries, and the page the finder answers with (``reads/lists.py``).

Every job column; on the dashboard's lists (``preview_chars``, ``limits.PREVIEW_CHARS``) the
payload and the result are only the first characters of their JSON text, cut in SQL, so a large
value never leaves the database for a page that shows neither whole. The API leaves
``preview_chars`` unset and gets them whole.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, Text, cast, func

from ..models import Job
from ..records import JobRecord, Row

jobs = Job.__table__
PREVIEWED = ("payload", "result")

# How many parents a job still waits for: its count kept apart while above one
# (jobs_job_waiting, migration 0025), else its row's. The database's function, so that the
# statements in .sql files read it the same way.
WAITING_ON = func.jobs_waiting_on(jobs.c.id, jobs.c.waiting_on, type_=Integer).label("waiting_on")

Keyset = tuple[datetime, uuid.UUID]  # (created_at, id) of a row of a list: where a page starts


@dataclass(frozen=True)
class JobPage:
    count: int
    results: list[JobRecord]
    count_exact: bool = True  # False: a count on a large table, past its cap, estimated


def list_columns(preview_chars: int | None) -> list[Any]:
    """Every job column in the table's order, ``waiting_on`` as :data:`WAITING_ON` reads it;
    with ``preview_chars``, payload and result are the first that many characters of their
    JSON text (a ``str``, or ``None``), not the values."""
    read = {"waiting_on": WAITING_ON}
    if preview_chars is not None:
        read |= {name: func.left(cast(jobs.c[name], Text), preview_chars).label(name) for name in PREVIEWED}
    return [read.get(column.name, column) for column in jobs.c]


def page_of(rows: Iterable[Row], count: int, *, exact: bool = True) -> JobPage:
    """A page of these rows (each with :func:`list_columns`' columns) and its count."""
    return JobPage(count=count, results=[JobRecord.from_row(row) for row in rows], count_exact=exact)
