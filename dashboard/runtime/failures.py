"""How a failed attempt is classified and described.

``last_error`` reads ``ExceptionType: message``; a handler's result must be storable as
jsonb; a database error is either "unreachable" (retry later, on a new connection) or a
refusal of this statement (record the attempt as failed).
"""

from __future__ import annotations

import json
from typing import Any

from ..database import is_connection_fault

MAX_ERROR_LENGTH = 4000
MAX_TRACEBACK_LENGTH = 16_384  # characters of a traceback kept in a retry/failed event
TRACEBACK_HEAD = 4_096  # of which the start (the outer frames); the rest is the end


class UnknownJobType(LookupError):
    """No handler is registered for the job's type in this worker.

    An ordinary failed attempt (retried with backoff, then ``failed``): the API accepts any
    type, and the workers that handle it may be deployed later. ``last_error`` starts with
    :data:`UNKNOWN_TYPE_PREFIX`, which the job page recognises to explain it.
    """


UNKNOWN_TYPE_PREFIX = "UnknownJobType:"

_STRICT_JSON = json.JSONEncoder(allow_nan=False)  # json.dumps(..., allow_nan=False), built once


class ResultNotSerialisable(TypeError):
    """The handler returned something that cannot be stored as a jsonb result."""


class ResultRejected(ValueError):
    """The database refused the handler's result."""


class UnreadablePayload(ValueError):
    """The job's payload is nested too deeply for this worker to decode (``jsonb.py``)."""


def describe(error: BaseException) -> str:
    """``ExceptionType: message``, the form ``last_error`` takes."""
    message = str(error).strip()
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text if len(text) <= MAX_ERROR_LENGTH else text[: MAX_ERROR_LENGTH - 1] + "…"


def cap_traceback(text: str, limit: int = MAX_TRACEBACK_LENGTH, head: int = TRACEBACK_HEAD) -> str:
    """``text`` if it fits in ``limit`` characters, else its first ``head`` characters and its
    last ones (where the exception and the innermost frames are), joined by a line saying how
    much was cut: at most ``limit`` characters in all."""
    if len(text) <= limit:
        return text
    marker = (
        "\n[... {cut} characters of the traceback cut ({total} in all); kept the start and the end ...]\n"
    )
    longest = len(marker.format(cut=len(text), total=len(text)))
    tail = max(0, limit - head - longest)
    cut = len(text) - head - tail
    return text[:head] + marker.format(cut=cut, total=len(text)) + text[len(text) - tail :]


def check_result(result: Any) -> None:
    """Raise :class:`ResultNotSerialisable` unless ``result`` can be a jsonb value.

    Stricter than ``json.dumps``: NaN and infinities are not JSON, and PostgreSQL's jsonb
    cannot hold NUL characters.
    """
    if result is None:  # the most common result, and valid
        return
    try:
        _STRICT_JSON.encode(result)
    except (TypeError, ValueError, RecursionError) as error:
        raise ResultNotSerialisable(f"handler result is not JSON-serialisable ({error})") from None
    if _has_nul(result):
        raise ResultNotSerialisable("handler result contains a NUL character, which jsonb cannot store")


def check_report(message: Any, data: Any) -> None:
    """Raise ``TypeError``/``ValueError`` naming the argument unless a progress report can be
    written as it is (``message`` text, ``data`` a JSON object); NUL characters are replaced on
    the way in (``values.pg_safe``), so they pass. Checked in the handler's own call, so its
    write later never meets a refusal."""
    if not isinstance(message, str):
        raise TypeError(f"message must be a string, got {type(message).__name__}")
    if data is not None and not isinstance(data, dict):
        raise TypeError(f"data must be a dict, got {type(data).__name__}")
    for name, value in (("message", message), ("data", data)):
        try:
            _STRICT_JSON.encode(value)
        except (TypeError, ValueError, RecursionError) as error:
            raise ValueError(f"{name} must be JSON-serialisable ({error})") from None
        if _has_lone_surrogate(value):
            raise ValueError(f"{name} holds a lone surrogate, which is not text PostgreSQL can store")


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(str(k)) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def _has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


def is_connection_error(error: BaseException) -> bool:
    """The database could not be reached, or the server reached cannot take writes (a standby
    after a failover: SQLSTATE 25006), as opposed to refusing a statement
    (``database.is_connection_fault``): the connection is dropped, the step retried, no attempt
    charged."""
    return is_connection_fault(error)


def first_line(error: BaseException) -> str:
    text = str(getattr(error, "orig", None) or error).strip()
    return text.splitlines()[0] if text else type(error).__name__
