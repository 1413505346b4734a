"""The parsers: how one variable's text becomes a setting's value, or an error naming it.

A parser is ``parser(env, name, default, **options)``: the value of variable ``name`` in
``env``, ``default`` when unset, a :class:`ConfigError` naming ``name`` when malformed. A
settings field names its parser and the parser's options in its metadata (:func:`.fields.env`).
The ``parse_*`` functions read one value whoever gives it (``flask worker --queues`` too).
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass, field

from .database_urls import problem as database_url_problem
from .rules import queue_problem

TOKEN_MIN_LENGTH = 32  # API tokens and METRICS_TOKEN
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class ConfigError(ValueError):
    """A setting has a value the application cannot use."""


def read_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


def read_number(env: Mapping[str, str], name: str, default: float, *, minimum: float) -> float:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not math.isfinite(value) or value < minimum:
        raise ConfigError(f"{name} must be a finite number >= {minimum:g}, got {raw!r}")
    return value


def read_int(
    env: Mapping[str, str], name: str, default: int, *, minimum: int, maximum: int | None = None
) -> int:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, got {raw!r}") from None
    if value < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {raw!r}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{name} must be <= {maximum}, got {raw!r}")
    return value


def cpu_count() -> int:
    """The CPUs this process may run on (``os.process_cpu_count`` where Python has it, which
    honours an affinity mask), at least 1."""
    counted = getattr(os, "process_cpu_count", os.cpu_count)()
    return max(1, counted or 1)


def parse_processes(raw: str, name: str) -> int:
    """A worker's process count (``--processes`` / ``JOB_WORKER_PROCESSES``): a whole number
    >= 1, or ``auto`` for the host's CPU count (:func:`cpu_count`). ``ConfigError`` naming
    ``name`` otherwise."""
    value = raw.strip().lower()
    if value == "auto":
        return cpu_count()
    try:
        count = int(value)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number >= 1 or auto, got {raw!r}") from None
    if count < 1:
        raise ConfigError(f"{name} must be a whole number >= 1 or auto, got {raw!r}")
    return count


def read_processes(env: Mapping[str, str], name: str, default: int) -> int:
    """:func:`parse_processes` of ``name``; blank counts as unset."""
    raw = (env.get(name) or "").strip()
    return parse_processes(raw, name) if raw else default


def read_list(env: Mapping[str, str], name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    raw = env.get(name)
    if raw is None:
        return default
    return tuple(part.strip() for part in raw.split(",") if part.strip())


def parse_queues(raw: str, name: str) -> tuple[str, ...] | None:
    """A comma-separated list of queue names (``--queues`` / ``JOB_WORKER_QUEUES``); blank: every
    queue (``None``). ``ConfigError`` naming ``name`` and the bad entry otherwise."""
    parts = [part.strip() for part in raw.split(",")]
    if not any(parts):
        return None
    names: list[str] = []
    for part in parts:
        if problem := queue_problem(part):
            raise ConfigError(f"{name}: queue {part!r} {problem}")
        if part not in names:
            names.append(part)
    return tuple(names)


def read_queues(env: Mapping[str, str], name: str, default: tuple[str, ...] | None) -> tuple[str, ...] | None:
    raw = env.get(name)
    return default if raw is None else parse_queues(raw, name)


def read_networks(env: Mapping[str, str], name: str, default: tuple[str, ...]) -> tuple[str, ...]:
    """IP addresses or networks (``10.0.0.0/8``), comma separated, or ``*``: as gunicorn reads them."""
    entries = read_list(env, name, default)
    for entry in entries:
        if entry == "*":
            continue
        try:
            ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ConfigError(f"{name} must list IP addresses or networks (or *), got {entry!r}") from None
    return entries


def read_str(env: Mapping[str, str], name: str, default: str) -> str:
    return env.get(name, default)


def read_optional_str(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    """Blank counts as unset."""
    return (env.get(name) or "").strip() or default


def read_database_url(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    """A PostgreSQL URL of one host or several (``database_urls``); blank counts as unset. The
    error names ``name`` and the fault, never the URL (it may hold a password)."""
    value = read_optional_str(env, name, default)
    if value is not None and (problem := database_url_problem(value)):
        raise ConfigError(f"{name}: {problem}")
    return value


def read_trace_url(env: Mapping[str, str], name: str, default: str | None) -> str | None:
    """A link to a trace viewer, ``http(s)://`` with ``{trace_id}`` in it; blank counts as unset."""
    value = read_optional_str(env, name, default)
    if value is None:
        return None
    if not re.match(r"https?://[^\s]+$", value) or "{trace_id}" not in value:
        raise ConfigError(f"{name} must be an http(s):// URL with {{trace_id}} in it, got {value!r}")
    return value  # {trace_id} is replaced as it is written; other braces (Tempo's JSON) stay


def read_secret(env: Mapping[str, str], name: str, default: str) -> str:
    return env.get(name) or default


def read_time_zone(env: Mapping[str, str], name: str, default: str) -> str:
    time_zone = env.get(name, default).strip() or default
    try:
        zoneinfo.ZoneInfo(time_zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ConfigError(f"{name} is not a known time zone: {time_zone!r}") from None
    return time_zone


def read_log_level(env: Mapping[str, str], name: str, default: str) -> str:
    """One of :data:`LOG_LEVELS`, case-insensitive."""
    log_level = env.get(name, default).strip().upper() or default
    if log_level not in LOG_LEVELS:
        raise ConfigError(f"{name} must be DEBUG, INFO, WARNING or ERROR, got {log_level!r}")
    return log_level


@dataclass(frozen=True)
class Entry:
    """One entry of a list setting that may hold secrets, and where it came from."""

    where: str  # "NAME entry 2", "NAME_FILE line 7": for error messages, which never quote it
    text: str = field(repr=False)


def read_entries(env: Mapping[str, str], name: str, default: tuple[Entry, ...]) -> tuple[Entry, ...]:
    """The entries of ``name`` (comma or newline separated), then those of the file that
    ``name_FILE`` names (one per line, ``#`` comments), so secrets can live in a mounted file.
    A file that cannot be read is a :class:`ConfigError`. What an entry means is its reader's
    business (``auth/credentials.py`` for users and tokens)."""
    parts = [part.strip() for part in re.split(r"[,\n]", env.get(name, "")) if part.strip()]
    found = [Entry(f"{name} entry {number}", part) for number, part in enumerate(parts, 1)]
    path = (env.get(f"{name}_FILE") or "").strip()
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{name}_FILE cannot be read: {path!r} ({exc})") from None
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if line and not line.startswith("#"):
                found.append(Entry(f"{name}_FILE line {number}", line))
    return tuple(found) or default


# --- Durations in days (retention) --------------------------------------------------
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "": 86400}


# The longest age a duration in days may be: "now minus it" stays a date every part of the
# stack can compute (Python's datetime ends at year 1, timedelta at 999,999,999 days).
MAX_DAYS = 36_500  # 100 years


def parse_days(raw: str, name: str) -> float:
    """``7`` or ``7d`` (days), ``12h``, ``30m``, ``90s``, ``2w``, fractions allowed; in days,
    at most :data:`MAX_DAYS`.

    ``0`` keeps forever. Anything else is a :class:`ConfigError` naming ``name``.
    """
    match = _DURATION.fullmatch(raw)
    if match is None:
        raise ConfigError(f"{name} must be a duration in days (7, 0.5, 7d, 12h, 30m), got {raw!r}")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    if not math.isfinite(seconds):
        raise ConfigError(f"{name} must be finite, got {raw!r}")
    if seconds / 86400 > MAX_DAYS:
        raise ConfigError(
            f"{name} must be at most {MAX_DAYS:,} days (100 years), got {raw!r}; 0 keeps jobs forever"
        )
    return seconds / 86400


def read_days(env: Mapping[str, str], name: str, default: float) -> float:
    """A duration in days (:func:`parse_days`); blank counts as unset."""
    raw = (env.get(name) or "").strip()
    return parse_days(raw, name) if raw else default


def read_choice(env: Mapping[str, str], name: str, default: str, *, choices: tuple[str, ...]) -> str:
    """One of ``choices``, case-insensitive; blank counts as unset."""
    value = (env.get(name) or "").strip().lower() or default
    if value not in choices:
        raise ConfigError(f"{name} must be {' or '.join(choices)}, got {value!r}")
    return value


def read_token(env: Mapping[str, str], name: str, default: str | None, *, min_length: int) -> str | None:
    """An optional secret of at least ``min_length`` characters; blank counts as unset."""
    token = (env.get(name) or "").strip() or default
    if token is not None and len(token) < min_length:
        raise ConfigError(f"{name} must be at least {min_length} characters")
    return token
