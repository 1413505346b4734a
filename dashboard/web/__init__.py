"""Dashboard blueprint: server-rendered pages for operators, with HTMX fragments.

Every page works as plain HTML links and forms; a request carrying ``HX-Request`` gets only
the fragment that changes (polling and in-place swaps). The views read through
``store.read`` and change state only through ``store.service``.
"""

from flask import Blueprint

bp = Blueprint("web", __name__)

# The view modules register their routes on ``bp`` when imported.
from . import errors, events, guards, jobs, overview, rendering, signin  # noqa: E402, F401
