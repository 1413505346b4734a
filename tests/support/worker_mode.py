"""The worker mode of the tests that start real worker processes.

``TEST_WORKER_BATCH_SIZE=4 pytest -m process tests/runtime tests/ops`` runs them in batch mode;
``pytest --batch-mode-too`` runs them in both modes in one session (CI does): the reference's
semantics must hold in either. Read when a worker starts, never at import: under
``--batch-mode-too`` the ``worker_mode`` fixture (``tests/conftest.py``) sets the variable for
one test.
"""

from __future__ import annotations

import os

SECOND_RUN_BATCH_SIZE = "4"  # the batch size of a test's second run under --batch-mode-too


def worker_mode_env() -> dict[str, str]:
    return {"JOB_WORKER_BATCH_SIZE": os.environ.get("TEST_WORKER_BATCH_SIZE", "1")}


def batch_mode() -> bool:
    return worker_mode_env()["JOB_WORKER_BATCH_SIZE"] != "1"
