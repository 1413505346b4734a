"""Fixtures of the worker process tests (the real ``flask worker`` as a subprocess)."""

from tests.worker.conftest import flusher, start_worker

__all__ = ["flusher", "start_worker"]
