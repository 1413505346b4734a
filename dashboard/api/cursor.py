"""Opaque cursors for the event feed: a position in the feed, base64-encoded.

A cursor is ``b:<id>`` (events older than ``id``: the next page) or ``a:<id>`` (events newer
than ``id``: the previous page). Clients must treat it as opaque, as with DRF's cursors; the
encoding only keeps it from looking like something to edit. Positions are event ids, which
only grow, so a walk over ``next`` never skips or repeats an event while new ones arrive.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Literal

BIGINT_MAX = 2**63 - 1
_POSITION = re.compile(r"([ab]):([0-9]{1,19})")


@dataclass(frozen=True)
class Cursor:
    direction: Literal["before", "after"]
    position: int

    def encode(self) -> str:
        raw = f"{self.direction[0]}:{self.position}".encode("ascii")
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode(token: str) -> Cursor:
    """The cursor ``token`` stands for; ``ValueError`` for anything this module did not make."""
    if not 1 <= len(token) <= 40 or not token.isascii():
        raise ValueError("invalid cursor")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise ValueError("invalid cursor") from None
    match = _POSITION.fullmatch(raw)
    if match is None:
        raise ValueError("invalid cursor")
    position = int(match.group(2))
    if position > BIGINT_MAX:
        raise ValueError("invalid cursor")
    cursor = Cursor("before" if match.group(1) == "b" else "after", position)
    if cursor.encode() != token:  # only the canonical spelling: one cursor, one token
        raise ValueError("invalid cursor")
    return cursor
