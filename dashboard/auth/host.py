"""The host's answer: where the queue is mounted in a host's app, ``authorize(request)`` says
who a request is (``"operator"``, ``"viewer"`` or ``None``), in place of the queue's own sign-in.

Both doors ask it: the pages for every request, the API only for its read-only open endpoints
(health, readiness, the schema and its docs page), which a token opens too.
"""

from __future__ import annotations

from flask import current_app, request

from ..mount import Mount
from ..roles import ROLES, Role
from .principals import Actor

HOST_ACTOR = "host"  # the actor recorded for actions the host's authorize allowed
HOST_CREDENTIAL = "host"


def host_actor(mount: Mount) -> Actor | None:
    """Who the host's ``authorize(request)`` says this request is; ``None`` when it refuses
    (``None``, or, a host's bug, anything but a role, which is logged)."""
    answer = mount.authorize(request) if mount.authorize is not None else None
    if answer not in ROLES:
        if answer is not None:
            current_app.logger.error(
                "authorize(request) answered %r: expected 'operator', 'viewer' or None", answer
            )
        return None
    return Actor(HOST_ACTOR, Role(answer), HOST_CREDENTIAL)
