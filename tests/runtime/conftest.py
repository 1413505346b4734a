"""The worker subprocess fixture, shared with the worker's own tests."""

from tests.worker.conftest import start_worker

__all__ = ["start_worker"]
