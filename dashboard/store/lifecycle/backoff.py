"""Deterministic exponential backoff: one pure function, and its table for SQL."""

from __future__ import annotations


def retry_delay(attempt: int, base_seconds: float, max_seconds: float) -> float:
    """Seconds to wait before the next try after ``attempt`` failed.

    ``min(base * 2 ** (attempt - 1), max)``: with the defaults 5, 10, 20, ... capped at 300.
    """
    if attempt < 1:
        raise ValueError(f"attempt numbers start at 1, got {attempt}")
    exponent = attempt - 1
    if exponent >= 64:  # 2**64 * base passes any sane cap; avoid float overflow
        return float(max_seconds)
    return float(min(base_seconds * 2**exponent, max_seconds))


def delay_table(base_seconds: float, max_seconds: float) -> list[float]:
    """``retry_delay`` for attempts 1..N, stopping once the cap is reached.

    The rescue of expired leases requeues many jobs, each at its own attempt, in one statement; it
    looks the delay up in this table (``COALESCE(table[attempts], max)``) so that the formula
    lives only here.
    """
    table: list[float] = []
    attempt = 1
    while True:
        delay = retry_delay(attempt, base_seconds, max_seconds)
        table.append(delay)
        if delay >= max_seconds or attempt >= 64:
            return table
        attempt += 1
