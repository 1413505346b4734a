"""Job error text cannot forge lines in the worker's text log."""

from __future__ import annotations

import logging

import pytest

from dashboard.logsafe import SafeFormatter, escape_control
from dashboard.store.lifecycle import create as enqueue
from tests.support.worker_loop import wait_for_status

FORGED = "2026-01-01 00:00:00,000 INFO    [thread-1] dashboard.runtime.runner: FORGED"


def test_escape_control_keeps_text_on_one_line():
    assert escape_control("a\nb\rc\x1b[31md\u2028e\tf") == "a\\nb\\rc\\x1b[31md\\u2028e\tf"


def test_safe_formatter_escapes_the_message_but_keeps_the_traceback():
    formatter = SafeFormatter("%(levelname)s %(message)s")
    try:
        raise ValueError("inner")
    except ValueError:
        import sys

        record = logging.LogRecord(
            "x", logging.ERROR, __file__, 1, "error: %s", ("boom\nINFO FORGED",), sys.exc_info()
        )
    text = formatter.format(record)
    first, *rest = text.splitlines()
    assert first == "ERROR error: boom\\nINFO FORGED"
    assert rest[0].startswith("Traceback")


@pytest.mark.process
def test_a_job_error_with_a_newline_stays_on_its_log_line(app, start_worker):
    created = enqueue.create_job(
        enqueue.JobSpec("demo.fail", {"error": f"boom\n{FORGED}"}, max_attempts=1)
    ).job
    worker = start_worker()

    failed = wait_for_status(created.id, "failed")
    output = worker.wait_for_output(f"job {created.id} (demo.fail) attempt 1/1 failed for good")

    assert failed.last_error == f"DemoError: boom\n{FORGED}"  # the data keeps its text
    lines = [line for line in output.splitlines() if "FORGED" in line]
    assert lines and all(not line.startswith("2026-01-01") for line in lines)
    assert all("attempt 1/1 failed for good" in line and "boom\\n2026-01-01" in line for line in lines)
