"""Fixtures for the runtime's tests: real ``flask worker`` processes, healthy or crashing."""

from tests.support.tracing import memory_spans  # noqa: F401  (a fixture)
from tests.support.worker_process import flusher, start_worker  # noqa: F401  (fixtures)

from .crashing import workers  # noqa: F401  (a fixture)
