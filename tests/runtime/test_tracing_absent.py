"""Without OpenTelemetry, nothing of it is imported and nothing changes: an enqueue and a
worker's attempt run in processes where ``opentelemetry`` cannot be imported, and neither
process has loaded any of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.worker_loop import wait_for_status
from tests.support.worker_process import PROJECT_ROOT, subprocess_env

pytestmark = pytest.mark.process

BLOCKER = '''
import sys

class _NoOpenTelemetry:
    """Makes OpenTelemetry unimportable in this process, installed or not."""

    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoOpenTelemetry())
'''

ENQUEUE = """
import json, sys
try:
    import opentelemetry
    blocked = False
except ModuleNotFoundError:
    blocked = True
from dashboard import create_app
from dashboard.jobs import enqueue
app = create_app()
with app.app_context():
    job = enqueue("sample.modules")
loaded = sorted(m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry."))
print(json.dumps({"blocked": blocked, "id": str(job.id), "otel": loaded}))
"""


def test_enqueue_and_attempt_without_opentelemetry(app, libpq_url, start_worker, tmp_path: Path):
    blocker = tmp_path / "no-otel"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join(filter(None, [str(blocker), os.environ.get("PYTHONPATH")]))
    env = subprocess_env(libpq_url, PYTHONPATH=path, DEBUG="true")  # a development app: no keys needed
    done = subprocess.run(
        [sys.executable, "-c", ENQUEUE],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    told = json.loads(done.stdout.strip().splitlines()[-1])
    assert told["blocked"] and told["otel"] == []
    start_worker(PYTHONPATH=path, JOB_HANDLER_MODULES="tests.runtime.snooze_handlers")
    job = wait_for_status(told["id"], "succeeded", "failed", timeout=60)
    assert job.status == "succeeded", job.last_error
    assert job.result == {"otel": []} and job.traceparent is None
