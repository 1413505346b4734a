"""The lifecycle: every statement that moves a job, each module beside the ``.sql`` it runs.

- :mod:`.create`: new jobs (``create.sql``); :mod:`.claim` and :mod:`.claim_form`: queued ->
  running; :mod:`.attempt`: the lease renewed, progress; :mod:`.settle`: running -> succeeded,
  queued or failed; :mod:`.snooze`: running -> queued later, the attempt not counted;
  :mod:`.rescue`: expired leases; :mod:`.actions`: an operator's retry, cancel, run now,
  delete; :mod:`.retention`: pruning finished jobs.

The worker's verbs are re-exported here, and ``utcnow`` with them: the worker's clock, read
through this package so that a test can move it.
"""

from ..values import utcnow
from .attempt import progress_report, record_progress, renew_lease
from .claim import claim_batch, claim_jobs, claim_next_job
from .rescue import rescue_expired_jobs
from .settle import complete_and_claim, complete_job, complete_jobs, fail_job
from .snooze import snooze_job

__all__ = [
    "claim_batch",
    "claim_jobs",
    "claim_next_job",
    "complete_and_claim",
    "complete_job",
    "complete_jobs",
    "fail_job",
    "progress_report",
    "record_progress",
    "renew_lease",
    "rescue_expired_jobs",
    "snooze_job",
    "utcnow",
]
