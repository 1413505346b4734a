"""What a production ``SECRET_KEY`` must be: long, varied, not the development key."""

from __future__ import annotations

import math

DEV_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
SECRET_KEY_MIN_LENGTH = 32
SECRET_KEY_MIN_DISTINCT = 12  # distinct characters: 32 x "a" is long, not random
SECRET_KEY_MIN_BITS = 128  # estimated from its length and alphabet (see secret_key_bits)


def secret_key_bits(key: str) -> float:
    """A rough entropy estimate: length times log2 of the alphabet the key's characters come
    from (digits, lower case, upper case, other printable ASCII, anything else). It catches
    long keys with little in them (``"a" * 32``: 150 bits by length, refused by distinctness;
    ``"abab..."``), not every weak key: generate keys, do not type them."""
    alphabet = 0
    if any(c.isdigit() for c in key):
        alphabet += 10
    if any("a" <= c <= "z" for c in key):
        alphabet += 26
    if any("A" <= c <= "Z" for c in key):
        alphabet += 26
    if any(c.isascii() and not c.isalnum() for c in key):
        alphabet += 33
    if any(not c.isascii() for c in key):
        alphabet += 100
    return len(key) * math.log2(alphabet) if alphabet > 1 else 0.0


def secret_key_is_strong(key: str) -> bool:
    """At least :data:`SECRET_KEY_MIN_LENGTH` characters, :data:`SECRET_KEY_MIN_DISTINCT` of
    them different, and :data:`SECRET_KEY_MIN_BITS` by :func:`secret_key_bits`."""
    return (
        len(key) >= SECRET_KEY_MIN_LENGTH
        and len(set(key)) >= SECRET_KEY_MIN_DISTINCT
        and secret_key_bits(key) >= SECRET_KEY_MIN_BITS
    )
