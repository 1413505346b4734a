"""Query-string filters of the list pages, parsed without ever raising.

A bad value becomes a message shown next to the filter form; the page still renders. Names
are the JSON API's (``status``, ``type``, ``limit``, ``offset``; ``type``, ``job_id`` and the
``before``/``after`` cursor of the feed).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..config.rules import (
    BIGINT_MAX,
    EVENT_PAGE_MAX,
    EVENT_PAGE_SIZE,
    JOB_OFFSET_MAX,
    JOB_PAGE_MAX,
    JOB_PAGE_SIZE,
    TYPE_MAX_LENGTH,
    queue_problem,
)
from ..store.states import ACTIVITY_EVENTS, EVENT_TYPES, STATUSES


def _int(
    args: Mapping[str, str], name: str, errors: dict[str, str], *, minimum: int, maximum: int
) -> int | None:
    raw = (args.get(name) or "").strip()
    if not raw:
        return None
    try:
        value = int(raw)
    except ValueError:
        errors[name] = f"{name} must be a whole number."
        return None
    if not minimum <= value <= maximum:
        errors[name] = f"{name} must be between {minimum} and {maximum}."
        return None
    return value


def _page_size(args: Mapping[str, str], errors: dict[str, str], default: int, maximum: int) -> int:
    """Like the API: a limit above the maximum is clamped to it, not refused."""
    value = _int(args, "limit", errors, minimum=1, maximum=BIGINT_MAX)
    return default if value is None else min(value, maximum)


Keyset = tuple[datetime, uuid.UUID]


def keyset_param(created_at: datetime, job_id: uuid.UUID) -> str:
    """A row's position in the list as a URL value: ``<created_at ISO>_<id>``."""
    return f"{created_at.isoformat()}_{job_id}"


def _keyset(args: Mapping[str, str], name: str, errors: dict[str, str]) -> Keyset | None:
    raw = (args.get(name) or "").strip()
    if not raw:
        return None
    try:
        moment, _, job_id = raw.rpartition("_")
        created_at = datetime.fromisoformat(moment)
        if created_at.tzinfo is None:
            raise ValueError("no time zone")
        return created_at, uuid.UUID(job_id)
    except ValueError:
        errors[name] = f"{name} must be a position from the list's own links."
        return None


@dataclass(frozen=True)
class JobFilters:
    status: str = ""
    type: str = ""
    queue: str = ""  # exact queue name
    limit: int = JOB_PAGE_SIZE
    offset: int = 0
    before: Keyset | None = None  # keyset paging: rows older than this (created_at, id)
    after: Keyset | None = None  # rows newer than this
    errors: dict[str, str] = field(default_factory=dict)
    q: str = ""  # search (``store/reads/search.py``)
    order: str = "newest"  # or "next": ready jobs in claim order
    # True: only jobs an operator cancelled (stored as failed); False: none of them; None: either.
    cancelled: bool | None = None
    # A live first page holds its rows: the newest row it showed; newer ones are counted, not shown.
    top: Keyset | None = None
    include_cancelled: bool = False  # a bulk retry asked for the cancelled jobs too

    @property
    def keyed(self) -> bool:
        """Paged by (created_at, id) keyset links: newest first, with or without ``q``."""
        return self.order == "newest"

    @property
    def positioned(self) -> bool:
        """Not the first page."""
        return bool(self.offset or self.before or self.after)

    def query(self, **changes: object) -> dict[str, Any]:
        """URL parameters for this view of the list, with ``changes`` applied; empties dropped."""
        values: dict[str, object] = {"status": self.status, "type": self.type, "offset": self.offset}
        values["queue"] = self.queue
        values.update(q=self.q, order="" if self.order == "newest" else self.order)
        values["cancelled"] = "" if self.cancelled is None else ("true" if self.cancelled else "false")
        for name in ("before", "after", "top"):
            key = getattr(self, name)
            values[name] = keyset_param(*key) if key else None
        if self.limit != JOB_PAGE_SIZE:
            values["limit"] = self.limit
        values.update(changes)
        return {k: v for k, v in values.items() if v not in ("", None, 0)}

    def first_page(self) -> dict[str, object]:
        return self.query(offset=None, before=None, after=None, top=None)

    def describe(self) -> str:
        """The filter in words, for the page title: ``failed, type “mail”``."""
        parts = []
        if self.cancelled is True:
            parts.append("cancelled")
        elif self.status:
            parts.append(self.status + (", not cancelled" if self.cancelled is False else ""))
        if self.type:
            parts.append(f"type contains “{self.type}”")
        if self.queue:
            parts.append(f"queue “{self.queue}”")
        if self.q:
            parts.append(f"search “{self.q}”")
        if self.order == "next":
            parts.append("next to run")
        return ", ".join(parts)


def job_filters(args: Mapping[str, str]) -> JobFilters:
    """The list's filters; paging by ``before``/``after`` keyset links, or an ``offset`` up to
    :data:`JOB_OFFSET_MAX` (deeper pages only by keyset: an offset reads every row it skips)."""
    errors: dict[str, str] = {}
    status = (args.get("status") or "").strip()
    if status and status not in STATUSES:
        errors["status"] = f"status must be one of {', '.join(STATUSES)}."
        status = ""
    type_ = (args.get("type") or "").strip()
    if len(type_) > TYPE_MAX_LENGTH or "\x00" in type_:
        errors["type"] = f"type must be at most {TYPE_MAX_LENGTH} printable characters."
        type_ = ""
    queue = (args.get("queue") or "").strip()
    if queue and (problem := queue_problem(queue)):
        errors["queue"] = f"A queue name {problem}."
        queue = ""
    limit = _page_size(args, errors, JOB_PAGE_SIZE, JOB_PAGE_MAX)
    offset = _int(args, "offset", errors, minimum=0, maximum=JOB_OFFSET_MAX) or 0
    before, after = _keyset(args, "before", errors), _keyset(args, "after", errors)
    top = _keyset(args, "top", errors)
    cancelled = _flag(args, "cancelled", errors)
    include_cancelled = (args.get("include_cancelled") or "").strip().lower() in ("1", "true", "on", "yes")
    if before and after:
        errors["after"] = "Give before or after, not both."
        after = None
    q, order = (args.get("q") or "").strip(), (args.get("order") or "newest").strip()
    if order not in ORDERS:
        errors["order"] = f"order must be one of {', '.join(ORDERS)}."
        order = "newest"
    if order != "newest":  # claim order pages by offset (store/find_jobs.next_to_run)
        before = after = top = None
    if "offset" in errors:
        errors["offset"] += (
            " Deeper pages: follow the Older link."
            if order == "newest"
            else " Next to run pages only this far: filter by type to see others."
        )
    return JobFilters(
        status=status,
        type=type_,
        queue=queue,
        limit=limit,
        offset=offset,
        before=before,
        after=after,
        errors=errors,
        q=q,
        order=order,
        cancelled=cancelled,
        top=top,
        include_cancelled=include_cancelled,
    )


def _flag(args: Mapping[str, str], name: str, errors: dict[str, str]) -> bool | None:
    raw = (args.get(name) or "").strip().lower()
    if not raw:
        return None
    if raw in ("true", "1", "yes"):
        return True
    if raw in ("false", "0", "no"):
        return False
    errors[name] = f"{name} must be true or false."
    return None


ORDERS = ("newest", "next")
QUIET = ACTIVITY_EVENTS  # what "hide progress and renewals" leaves out


def _all(args: Mapping[str, str], name: str) -> list[str]:
    """Every value of a repeated parameter (``type=a&type=b``), or the one a plain mapping has."""
    getlist = getattr(args, "getlist", None)
    values = getlist(name) if getlist else [args.get(name) or ""]
    return [v.strip() for v in values if v and v.strip()]


@dataclass(frozen=True)
class EventFilters:
    types: tuple[str, ...] = ()
    job_id: uuid.UUID | None = None
    before: int | None = None
    after: int | None = None
    limit: int = EVENT_PAGE_SIZE
    # Progress and lease renewals (a running job's chatter) are left out of the whole feed
    # unless asked for (``chatter=1``) or ticked as types: by default it shows what changed.
    # One job's feed (``job_id``) shows all of its events.
    chatter: bool = False
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def quiet(self) -> bool:
        return not self.chatter and not self.types and self.job_id is None

    @property
    def filtered(self) -> bool:
        return bool(self.types or self.job_id or self.chatter)

    @property
    def exclude(self) -> tuple[str, ...]:
        return QUIET if self.quiet else ()

    def query(self, **changes: object) -> dict[str, Any]:
        values: dict[str, object] = {"type": list(self.types), "job_id": self.job_id}
        if self.chatter:
            values["chatter"] = 1
        if self.limit != EVENT_PAGE_SIZE:
            values["limit"] = self.limit
        values.update(changes)
        return {k: v for k, v in values.items() if v not in ("", None, [])}


def event_filters(args: Mapping[str, str]) -> EventFilters:
    """``type`` may repeat (any of them); ``chatter=1`` keeps progress and renewals, which are
    left out otherwise unless ticked as types (``quiet=1``, the old way to leave them out, is
    the default now and still accepted)."""
    errors: dict[str, str] = {}
    wanted = _all(args, "type")
    unknown = [t for t in wanted if t not in EVENT_TYPES]
    if unknown:
        errors["type"] = f"type must be one of {', '.join(EVENT_TYPES)}."
    types = tuple(dict.fromkeys(t for t in wanted if t in EVENT_TYPES))
    chatter = (args.get("chatter") or "").strip().lower() in ("1", "true", "on", "yes")
    job_id = None
    raw_job = (args.get("job_id") or "").strip()
    if raw_job:
        try:
            job_id = uuid.UUID(raw_job)
        except ValueError:
            errors["job_id"] = "job_id must be a job's UUID."
    before = _int(args, "before", errors, minimum=1, maximum=BIGINT_MAX)
    after = _int(args, "after", errors, minimum=0, maximum=BIGINT_MAX)
    if before is not None and after is not None:
        errors["after"] = "Give before or after, not both."
        after = None
    limit = _page_size(args, errors, EVENT_PAGE_SIZE, EVENT_PAGE_MAX)
    return EventFilters(
        types=types, job_id=job_id, before=before, after=after, limit=limit, chatter=chatter, errors=errors
    )
