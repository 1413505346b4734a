"""Bearer credentials: the one reading of ``Authorization: Bearer <token>`` (RFC 6750).

The JSON API and ``/metrics`` both authenticate this way and both read the header here, so
they accept exactly the same spellings: the scheme in any case, one token (no spaces in it),
whitespace around either ignored.
"""

from __future__ import annotations


class BearerError(ValueError):
    """No ``Authorization`` header (:attr:`missing`), or one that is not ``Bearer <token>``."""

    def __init__(self, missing: bool) -> None:
        super().__init__("no Authorization header" if missing else "not Bearer <token>")
        self.missing = missing


def bearer_token(header: str | None) -> str:
    """The token of an ``Authorization`` header's value; :class:`BearerError` otherwise."""
    if header is None:
        raise BearerError(missing=True)
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        raise BearerError(missing=False)
    return token
