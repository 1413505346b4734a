"""The signed-in clients of the access tests (a secured app, one client per role)."""

from tests.access.conftest import anonymous, operator, secured_app, viewer

__all__ = ["anonymous", "operator", "secured_app", "viewer"]
