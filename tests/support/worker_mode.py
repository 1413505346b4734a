"""The worker mode of the tests that start real worker processes.

``TEST_WORKER_BATCH_SIZE=4 pytest -m process tests/runtime tests/ops`` runs them again in batch
mode (CI does both): the reference's semantics must hold in either.
"""

from __future__ import annotations

import os


def worker_mode_env() -> dict[str, str]:
    return {"JOB_WORKER_BATCH_SIZE": os.environ.get("TEST_WORKER_BATCH_SIZE", "1")}


def batch_mode() -> bool:
    return worker_mode_env()["JOB_WORKER_BATCH_SIZE"] != "1"
