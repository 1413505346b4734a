"""Opaque cursors for the event feed: a position in the feed, as 11 base64url characters.

A cursor is 8 bytes, big-endian: the top bit is the direction (0: events older than the
position, the next page; 1: events newer than it, the previous page) and the other 63 bits the
position, an event id (a bigint). Clients must treat it as opaque, as with DRF's cursors.

The layout is chosen so that the published pattern (:data:`PATTERN`) is exact: every string
it matches decodes to a cursor and every cursor encodes to one string it matches. A client (or
a fuzzer) that follows the document can therefore never build a token the API refuses, and any
other token is refused with a 400. Positions are event ids, which only grow, so a walk over
``next`` never skips or repeats an event while new ones arrive.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Literal

from ..config.rules import BIGINT_MAX

_AFTER = 1 << 63
# 8 bytes are 64 bits = 11 base64 characters; the last one carries 4 bits and 2 zero bits.
PATTERN = "^[A-Za-z0-9_-]{10}[AEIMQUYcgkosw048]$"
_TOKEN = re.compile(PATTERN)


@dataclass(frozen=True)
class Cursor:
    direction: Literal["before", "after"]
    position: int

    def encode(self) -> str:
        if not 0 <= self.position <= BIGINT_MAX:
            raise ValueError("position out of range")
        value = self.position | (_AFTER if self.direction == "after" else 0)
        return base64.urlsafe_b64encode(value.to_bytes(8, "big")).decode("ascii").rstrip("=")


def decode(token: str) -> Cursor:
    """The cursor ``token`` stands for; ``ValueError`` for anything this module did not make."""
    if not _TOKEN.fullmatch(token):
        raise ValueError("invalid cursor")
    value = int.from_bytes(base64.urlsafe_b64decode(token + "="), "big")
    direction: Literal["before", "after"] = "after" if value & _AFTER else "before"
    return Cursor(direction, value & BIGINT_MAX)
