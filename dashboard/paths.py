"""Where the doors live in the URL space: the JSON API's prefix, and which paths are under it.

One rule for the blueprint's mount, the API's JSON error pages, its CORS and the session
(which the API, knowing bearer tokens only, never opens).
"""

from __future__ import annotations

API_PREFIX = "/api"


def is_api_path(path: str) -> bool:
    """``/api`` itself or anything under ``/api/``; not ``/apiary``."""
    return path == API_PREFIX or path.startswith(API_PREFIX + "/")
