"""The two roles, shared by the settings (which validate ``name:role:secret`` entries) and
by ``auth`` (which enforces them)."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    """``viewer`` reads everything; ``operator`` may also create and retry jobs."""

    VIEWER = "viewer"
    OPERATOR = "operator"

    def allows(self, needed: Role) -> bool:
        return _RANK[self] >= _RANK[needed]


_RANK = {Role.VIEWER: 0, Role.OPERATOR: 1}
ROLES = tuple(role.value for role in Role)  # the names a setting or a host's authorize may give
