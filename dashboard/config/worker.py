"""The worker's settings (``JOB_WORKER_*``, ``JOB_HANDLER_MODULES``, ``JOB_DEMO_HANDLERS``):
``Settings.worker``. The fields with ``option=True`` are also ``flask worker`` options."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

from .fields import env, follows, group, values_from_env
from .parsers import read_bool, read_int, read_list, read_log_level, read_number, read_processes, read_queues


@group
@dataclass(frozen=True)
class WorkerSettings:
    """The ``JOB_WORKER_*`` settings; ``flask worker`` options may override them."""

    threads: int = field(
        default=4,
        metadata=env(
            "JOB_WORKER_THREADS",
            read_int,
            minimum=1,
            option=True,
            doc="Worker threads per `flask worker` process.",
        ),
    )
    processes: int = field(
        default=1,
        metadata=env(
            "JOB_WORKER_PROCESSES",
            read_processes,
            option=True,
            doc="Worker processes `flask worker` runs, each with `JOB_WORKER_THREADS` threads; `auto`: one "
            "per CPU it may run on. More than 1 starts a supervisor that runs them, restarts one that "
            "dies and stops them all on SIGINT/SIGTERM; the first of them alone runs the rescuer, the "
            "scheduler and retention.",
        ),
    )
    poll_interval_ms: float = field(
        default=500.0,
        metadata=env(
            "JOB_WORKER_POLL_INTERVAL_MS",
            read_number,
            minimum=0,
            option=True,
            doc="Sleep when no job is claimable: shorter if a full rate window opens sooner, longer (up "
            "to 30 s, while LISTEN is up) if every served queue waits for its window.",
        ),
    )
    lease_seconds: float = field(
        default=30.0,
        metadata=env(
            "JOB_WORKER_LEASE_SECONDS",
            read_number,
            minimum=0.01,
            option=True,
            doc="Lease of a running attempt, extended by each renewal (`ctx.renew()`); an attempt whose "
            "lease expires is rescued: requeued with a backoff, or failed when out of attempts.",
        ),
    )
    cleanup_interval_seconds: float = field(
        default=5.0,
        metadata=env(
            "JOB_WORKER_CLEANUP_INTERVAL_SECONDS",
            read_number,
            minimum=0,
            option=True,
            doc="How often expired leases are recovered: by the rescuer of each `flask worker` (of its "
            "first process, with `--processes`), and between jobs by each thread of one-job mode "
            "(`JOB_WORKER_BATCH_SIZE=1`).",
        ),
    )
    cleanup_batch_size: int = field(
        default=100,
        metadata=env(
            "JOB_WORKER_CLEANUP_BATCH_SIZE",
            read_int,
            minimum=1,
            option=True,
            doc="Most expired leases recovered per pass.",
        ),
    )
    backoff_base_seconds: float = field(
        default=5.0,
        metadata=env(
            "JOB_WORKER_BACKOFF_BASE_SECONDS",
            read_number,
            minimum=0,
            option=True,
            doc="Retry delay after a job's first failed (or expired) attempt, doubled after each "
            "further one up to `JOB_WORKER_BACKOFF_MAX_SECONDS`.",
        ),
    )
    backoff_max_seconds: float = field(
        default=300.0,
        metadata=env(
            "JOB_WORKER_BACKOFF_MAX_SECONDS",
            read_number,
            minimum=0,
            option=True,
            doc="Longest retry delay: the cap of the doubling backoff.",
        ),
    )
    max_attempts_default: int = field(
        default=3,
        metadata=env(
            "JOB_WORKER_MAX_ATTEMPTS_DEFAULT",
            read_int,
            minimum=1,
            doc="`max_attempts` of jobs that do not say.",
        ),
    )
    max_snoozes: int = field(
        default=100,
        metadata=env(
            "JOB_MAX_SNOOZES",
            read_int,
            minimum=0,
            doc="How many times one job may snooze (`raise Snooze(seconds)`); the next snooze fails it "
            "for good, saying so in `last_error`. A manual retry starts the count again.",
        ),
    )
    log_level: str = field(
        default="INFO",
        metadata=env(
            "JOB_WORKER_LOG_LEVEL",
            read_log_level,
            option=True,
            doc="Level of the worker's own loggers (other libraries log at `WARNING`); `DEBUG` logs "
            "every poll, claim and execution.",
        ),
    )
    handler_modules: tuple[str, ...] = field(
        default=(),
        metadata=env(
            "JOB_HANDLER_MODULES",
            read_list,
            doc="Comma-separated modules imported at start (web and worker) to register job types.",
        ),
    )
    batch_size: int = field(
        default=1,
        metadata=env(
            "JOB_WORKER_BATCH_SIZE",
            read_int,
            minimum=1,
            option=True,
            doc="Jobs claimed in one statement (batch mode); at most twice this many held claimed ahead "
            "of the threads; 1 = one claim per thread (one-job mode).",
        ),
    )
    listen: bool = field(
        default=True,
        metadata=env(
            "JOB_WORKER_LISTEN",
            read_bool,
            option=True,
            doc="Wake idle threads on `NOTIFY` instead of waiting for the next poll.",
        ),
    )
    schedules: bool = field(
        default=True,
        metadata=env(
            "JOB_WORKER_SCHEDULES",
            read_bool,
            option=True,
            doc="Fire due schedules (recurring jobs) in this worker; `false` opts it out: it neither "
            "syncs the declared schedules nor fires them.",
        ),
    )
    queues: tuple[str, ...] | None = field(
        default=None,
        metadata=env(
            "JOB_WORKER_QUEUES",
            read_queues,
            option=True,
            doc="The named queues this worker claims from, comma separated; unset or blank: every "
            "queue, including ones that first appear later.",
        ),
    )
    demo_handlers: bool = field(
        default=True,
        metadata=env(
            "JOB_DEMO_HANDLERS",
            read_bool,
            derived=follows("DEBUG"),
            # not in /api/config/: its job_types already say whether the demo types exist
            shown=False,
            doc="Register the `demo.*` job types (web and worker).",
        ),
    )
    shutdown_timeout_seconds: float = field(
        default=3.0,
        metadata=env(
            "JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS",
            read_number,
            minimum=0,
            doc="After SIGINT/SIGTERM, how long running jobs may take before they are handed back "
            "(requeued at once) and the worker exits; `0`: no limit. The default fits inside the 5 s "
            "a Procfile runner (honcho) allows between SIGTERM and SIGKILL.",
        ),
    )
    heartbeat_seconds: float = field(
        default=5.0,
        metadata=env(
            "JOB_WORKER_HEARTBEAT_SECONDS",
            read_number,
            minimum=0.05,
            doc="How often each worker process reports in (`jobs_worker`); stale after 3 missed.",
        ),
    )
    progress_flush_ms: float = field(
        default=250.0,
        metadata=env(
            "JOB_WORKER_PROGRESS_FLUSH_MS",
            read_number,
            minimum=0,
            doc="A handler's pending `progress()` report is written within this long; a handler that "
            "ends sooner has it written with its settle statement.",
        ),
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> WorkerSettings:
        return cls(**values_from_env(cls, env))

    def as_dict(self) -> dict[str, object]:
        """The settings under their environment names, as ``/api/config/`` shows them."""
        shown: dict[str, object] = {}
        for spec in fields(self):
            if not spec.metadata["shown"]:
                continue
            value = getattr(self, spec.name)
            shown[spec.metadata["env"]] = list(value) if isinstance(value, tuple) else value
        return shown
