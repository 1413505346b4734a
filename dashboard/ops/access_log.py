"""gunicorn's access log, without the per-request copying its format line does not use.

gunicorn builds every access-log line from *atoms*: for each request it copies every request
header, every response header and every WSGI environ entry into them (``{name}i``, ``{name}o``,
``{name}e``), whether the format names any or not. With the default (combined) format, or any
other that names none, :class:`AccessLog` hands gunicorn only the environ entries that its
plain atoms read, so each line is the same and costs less. A format that does name such an
atom gets gunicorn's own atoms, unchanged. ``gunicorn.conf.py`` sets it as ``logger_class``.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from gunicorn.glogging import Logger

if TYPE_CHECKING:
    from gunicorn.glogging import _AtomsDict
    from gunicorn.http import Request
    from gunicorn.http.wsgi import Response

# What gunicorn's plain atoms read from the environ (h, u, r, m, U, q, H, f, a); ``u`` is the
# user name of Basic authorisation, never the password.
_PLAIN = (
    "REMOTE_ADDR",
    "REQUEST_METHOD",
    "RAW_URI",
    "SERVER_PROTOCOL",
    "PATH_INFO",
    "QUERY_STRING",
    "HTTP_REFERER",
    "HTTP_USER_AGENT",
    "HTTP_AUTHORIZATION",
)


class AccessLog(Logger):
    """gunicorn's ``Logger``; access-log atoms built only from what the format can name."""

    def atoms(
        self, resp: Response, req: Request, environ: MutableMapping[str, Any], request_time: timedelta
    ) -> _AtomsDict:
        if "{" in self.cfg.access_log_format:  # names a header or environ atom: gunicorn's own
            return super().atoms(resp, req, environ, request_time)
        plain = {key: environ[key] for key in _PLAIN if key in environ}
        # The plain atoms read the response's status and bytes sent, and nothing of the request:
        # a stand-in with those, and no request headers to copy.
        outcome, no_headers = cast("Response", _Outcome(resp)), cast("Request", ())
        return super().atoms(outcome, no_headers, plain, request_time)


class _Outcome:
    """The parts of gunicorn's response that its plain atoms read (status, bytes sent)."""

    __slots__ = ("headers", "sent", "status")

    def __init__(self, resp: Any) -> None:
        self.status = resp.status
        self.sent = getattr(resp, "sent", None)
        self.headers = ()
