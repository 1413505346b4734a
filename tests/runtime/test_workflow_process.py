"""Workflows run by real worker processes: a fan-in and a chain released exactly once each,
under two processes of two threads, with the parents' results handed on."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from dashboard.extensions import db
from dashboard.store.lifecycle import create as enqueue
from dashboard.store.lifecycle.create import JobSpec
from tests.support.waiting import wait_until

from .test_supervisor import started

pytestmark = pytest.mark.process

MODULES = "tests.runtime.sample_handlers"


def test_fan_in_and_chain_release_once_and_hand_on_results(app, start_worker):
    members, chain = 60, 15
    specs = [JobSpec("sample.gather", {"n": 1}, workflow="fan") for _ in range(members)]
    specs.append(JobSpec("sample.gather", {"n": 0}, depends_on=tuple(range(members))))
    specs.append(JobSpec("sample.gather", {"n": 1}, workflow="chain"))
    specs += [JobSpec("sample.gather", {"n": 1}, depends_on=(len(specs) - 1 + k,)) for k in range(chain - 1)]
    results = enqueue.create_jobs(specs)
    callback, last = results[members].job, results[-1].job
    assert callback.waiting_on == members and callback.workflow == "fan"
    worker = start_worker("--processes", "2", "--threads", "2", JOB_HANDLER_MODULES=MODULES)
    started(worker)

    def done() -> bool:
        with db.engine.connect() as conn:
            left = conn.execute(
                text("SELECT count(*) FROM jobs_job WHERE status <> 'succeeded'")
            ).scalar_one()
        return left == 0

    wait_until(done, 120, "every job of the fan-in and the chain to succeed")
    with db.engine.connect() as conn:
        released = dict(
            conn.execute(
                text("SELECT job_id, count(*) FROM jobs_jobevent WHERE type = 'released' GROUP BY job_id")
            ).all()
        )
        claims = conn.execute(
            text("SELECT count(*) FROM jobs_jobevent WHERE type = 'claimed' GROUP BY job_id")
        ).scalars()
        outcome = dict(
            conn.execute(
                text("SELECT id, result FROM jobs_job WHERE id = ANY(:ids)"), {"ids": [callback.id, last.id]}
            ).all()
        )
    assert released[callback.id] == 1 and released[last.id] == 1
    assert len(released) == 1 + (chain - 1) and set(released.values()) == {1}
    assert set(claims) == {1}  # nothing ran twice, no dependent claimed before its release
    assert outcome[callback.id]["sum"] == members and len(outcome[callback.id]["parents"]) == members
    assert outcome[last.id]["sum"] == chain
