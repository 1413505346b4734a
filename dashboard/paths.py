"""Where the doors live in the URL space: the JSON API's prefix, and which paths are under it.

One rule for the blueprint's mount, the API's JSON error pages, its CORS and the session
(which the API, knowing bearer tokens only, never opens).
"""

from __future__ import annotations

API_PREFIX = "/api"


def is_api_path(path: str, url_prefix: str = "") -> bool:
    """The API's prefix under ``url_prefix`` (the mount's: ``""`` at the root) itself, or
    anything under it: ``/api`` and ``/api/...`` at the root; not ``/apiary``."""
    api = url_prefix + API_PREFIX
    return path == api or path.startswith(api + "/")
