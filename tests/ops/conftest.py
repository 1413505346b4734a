from tests.support.worker_process import start_worker  # noqa: F401  (the real `flask worker` fixture)
