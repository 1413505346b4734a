from tests.worker.conftest import start_worker  # noqa: F401  (the real `flask worker` fixture)
