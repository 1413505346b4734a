"""Reading jsonb values that Python's JSON parser cannot.

jsonb accepts nesting far deeper than ``json.loads`` can follow: past about a thousand levels
it raises ``RecursionError``. The API and the dashboard refuse such payloads, but another
client (psql, a script writing the table directly) can store one, and then every read of the
row failed: the claim of that job (after it had committed), the job list and the job's page.
:func:`loads` reads such a value as an :class:`UnreadableJson` instead, so pages and API
answers still render and the worker fails the attempt with a clear error
(``failures.UnreadablePayload``).
"""

from __future__ import annotations

import json
from typing import Any

from psycopg.types.json import set_json_loads


class UnreadableJson(str):
    """Stands in for a JSON value nested too deeply to decode; its text says so."""

    __slots__ = ()


def loads(data: str | bytes) -> Any:
    """A json or jsonb value as psycopg hands it over (bytes), or text; too deep: :class:`UnreadableJson`."""
    try:
        return json.loads(data)
    except RecursionError:
        return UnreadableJson(f"(JSON value nested too deeply to decode here: {len(data):,} bytes)")


def install() -> None:
    """Make :func:`loads` psycopg's loader of json and jsonb values, process-wide."""
    set_json_loads(loads)
