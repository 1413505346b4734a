"""``flask worker --processes N``: a supervisor that starts, watches and stops N worker processes.

One Python process runs Python on one core at a time; a host with more cores runs more
processes. With ``--processes`` (``JOB_WORKER_PROCESSES``) above 1, ``flask worker`` becomes a
:class:`Supervisor`: it holds no database connection and runs no job. It starts each child as a
fresh process, the same command line with ``--processes`` taken out (:func:`child_command`),
never a fork of a process that holds connections or threads, and tells it who it is through
the environment (:data:`CHILD_ENV`): its index, the number of processes, the supervisor's pid
and the read end of a pipe. Each child is then a normal single worker with
``JOB_WORKER_THREADS`` threads, whose worker ids carry its own pid.

The supervisor:

- forwards SIGINT/SIGTERM to every child; each stops as a single worker does (no new claims,
  running handlers finish within ``JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS``, the rest handed
  back), and the supervisor exits 0 once the last one has exited. A second signal is
  forwarded too (the children exit at once) and the supervisor exits ``128 + signal``.
- starts each child in a session of its own, so a terminal's Ctrl-C (SIGINT to the foreground
  process group) or a process manager's signal to the supervisor's group reaches the
  supervisor alone, which forwards it once: a child never sees it twice.
- starts a child that exits while nothing asked it to again, after a backoff that doubles from
  :data:`RESTART_BASE_SECONDS` to :data:`RESTART_MAX_SECONDS` while it keeps dying, reset once
  it has run :data:`STABLE_AFTER_SECONDS`; it logs why (the exit status, or the signal's name).
  The dead child's running attempts are recovered by their leases, as any dead worker's.

No child outlives the supervisor, also when the supervisor is SIGKILLed: on Linux each child
asks the kernel for SIGHUP when its parent dies (``PR_SET_PDEATHSIG``, set first thing in
:func:`supervised`), and on any system it watches its pipe, whose end the supervisor holds:
end of file means the supervisor is gone. Either way the child stops as on SIGTERM, and only
once (:meth:`Child.watch`).

The process-wide duties, of which one copy per ``flask worker`` is enough, run in child 0
only (:attr:`Child.duties`): lease rescue (with its planner statistics and stale slots), the
scheduler and the retention pruner (with its stats recount). They are leaderless across hosts
already (``SKIP LOCKED``, idempotency keys on schedule slots, the pruner's lock), so a second
copy would be correct, only wasted; while child 0 is down, until the supervisor restarts it,
the one-job threads' own rescue ticks and the other hosts cover lease recovery, and a
schedule's missed slots are fired on its return as after any stop.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)

CHILD_ENV = "JOBQUEUE_WORKER_CHILD"  # "index,processes,supervisor pid,pipe fd"
PROCESSES_ENV = "JOB_WORKER_PROCESSES"
RESTART_BASE_SECONDS = 0.5
RESTART_MAX_SECONDS = 60.0
STABLE_AFTER_SECONDS = 30.0
WATCH_SECONDS = 0.1  # how often the supervisor looks at its children
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_DEATH_SIGNAL = signal.SIGHUP


def child_command(argv: Sequence[str] | None = None) -> list[str]:
    """This process's command line (``sys.orig_argv``: the interpreter, its options, then the
    ``flask`` script or ``-m flask`` and their arguments), the interpreter as
    ``sys.executable``, with every ``--processes`` option left out: what a child runs."""
    args = list(sys.orig_argv if argv is None else argv)
    kept: list[str] = []
    skip = False
    for arg in args[1:]:
        if skip:
            skip = False
        elif arg == "--processes":
            skip = True
        elif not arg.startswith("--processes="):
            kept.append(arg)
    return [sys.executable, *kept]


def exit_reason(returncode: int) -> str:
    """``exited with status 3`` or ``was killed by SIGKILL``, from a ``Popen.returncode``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


@dataclass
class Slot:
    """One child's place: its index, the process now in it (``None`` between two), and its
    restarts."""

    index: int
    proc: subprocess.Popen[bytes] | None = None
    pipe: int | None = None  # the write end of the child's pipe, held while it runs
    started_at: float = 0.0  # monotonic
    failures: int = 0  # deaths in a row, each within STABLE_AFTER_SECONDS of its start
    restart_at: float = 0.0  # monotonic: not started again before this

    def backoff(self, now: float, base: float, ceiling: float, stable_after: float) -> float:
        """The delay before the next start after a death now, counting this death."""
        if now - self.started_at >= stable_after:
            self.failures = 0
        self.failures += 1
        return min(ceiling, base * 2.0 ** min(self.failures - 1, 30))  # a float's exponent has a limit


@dataclass
class Supervisor:
    """Runs ``processes`` children of ``command`` until SIGINT/SIGTERM (:meth:`run`)."""

    command: list[str]
    processes: int
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    restart_base_seconds: float = RESTART_BASE_SECONDS
    restart_max_seconds: float = RESTART_MAX_SECONDS
    stable_after_seconds: float = STABLE_AFTER_SECONDS
    slots: list[Slot] = field(init=False)
    stopping_by: int | None = field(default=None, init=False)  # the first signal
    forced_by: int | None = field(default=None, init=False)  # a second one

    def __post_init__(self) -> None:
        self.slots = [Slot(index) for index in range(self.processes)]

    def run(self) -> int:
        """Start the children, restart those that die, and on the first SIGINT/SIGTERM forward
        it and wait for every child to exit: 0 then, ``128 + signal`` after a second signal.
        Must run in the main thread (signal handlers; and ``PR_SET_PDEATHSIG`` follows the
        thread that started a child, so the children are started from the thread that lives
        as long as the process)."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        log.info("supervisor (pid %d) starting %d worker processes", os.getpid(), self.processes)
        try:
            while self.step(time.monotonic()):
                time.sleep(WATCH_SECONDS)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.forced_by is not None:
            log.warning("supervisor stopped after a second signal")
            return 128 + self.forced_by
        log.info("supervisor stopped: every worker process has exited")
        return 0

    def step(self, now: float) -> bool:
        """Reap the children that exited and start those due; whether to go on (``False`` once
        stopping and no child runs)."""
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is not None:
                self._reaped(slot, now)
            if slot.proc is None and self.stopping_by is None and now >= slot.restart_at:
                self._start(slot, now)
        return self.stopping_by is None or any(slot.proc is not None for slot in self.slots)

    def children(self) -> list[int]:
        """The pids of the children running now."""
        return [
            slot.proc.pid for slot in self.slots if slot.proc is not None and slot.proc.returncode is None
        ]

    def _start(self, slot: Slot, now: float) -> None:
        read_end, write_end = os.pipe()  # both close on exec: only read_end is passed, below
        env = {
            **self.env,
            PROCESSES_ENV: "1",
            CHILD_ENV: f"{slot.index},{self.processes},{os.getpid()},{read_end}",
        }
        try:
            proc = subprocess.Popen(self.command, env=env, pass_fds=(read_end,), start_new_session=True)
        except OSError as error:
            os.close(write_end)
            delay = slot.backoff(now, self.restart_base_seconds, self.restart_max_seconds, float("inf"))
            slot.restart_at = now + delay
            log.error("could not start worker process %d (%s); trying again in %gs", slot.index, error, delay)
            return
        finally:
            os.close(read_end)
        slot.proc, slot.pipe, slot.started_at = proc, write_end, now
        log.info("started worker process %d of %d (pid %d)", slot.index, self.processes, proc.pid)

    def _reaped(self, slot: Slot, now: float) -> None:
        proc = slot.proc
        assert proc is not None and proc.returncode is not None
        if slot.pipe is not None:
            os.close(slot.pipe)
        slot.proc, slot.pipe = None, None
        reason = exit_reason(proc.returncode)
        if self.stopping_by is not None:
            log.info("worker process %d (pid %d) %s", slot.index, proc.pid, reason)
            return
        delay = slot.backoff(
            now, self.restart_base_seconds, self.restart_max_seconds, self.stable_after_seconds
        )
        slot.restart_at = now + delay
        log.warning(
            "worker process %d (pid %d) %s; starting it again in %gs (its running jobs are "
            "recovered when their leases expire)",
            slot.index,
            proc.pid,
            reason,
            delay,
        )

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.stopping_by is None:
            self.stopping_by = signum
            log.info("%s received: stopping %d worker process(es)", name, len(self.children()))
        else:
            self.forced_by = signum
            log.warning("second signal (%s): the worker processes exit at once", name)
        self.forward(signum)

    def forward(self, signum: int) -> None:
        """Send ``signum`` to every child still running (none is reaped meanwhile: a pid not
        yet reaped cannot have been reused)."""
        for slot in self.slots:
            if slot.proc is not None and slot.proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot.proc.pid, signum)


# --- The child's side ------------------------------------------------------------------------


@dataclass(frozen=True)
class Child:
    """A worker process a supervisor started: who it is, read from :data:`CHILD_ENV`."""

    index: int
    processes: int
    supervisor_pid: int
    pipe: int  # the read end: end of file once the supervisor is gone

    @property
    def duties(self) -> bool:
        """Whether this child runs the process-wide duties (child 0 only): lease rescue, the
        scheduler, retention."""
        return self.index == 0

    def details(self) -> dict[str, Any]:
        """What its heartbeat says of it (the Workers page: "process 2 of 4")."""
        return {"index": self.index, "processes": self.processes, "supervisor_pid": self.supervisor_pid}

    def metrics_port(self, port: int) -> int:
        """Its own ``/metrics`` port: ``JOB_WORKER_METRICS_PORT`` + its index (0 stays off)."""
        return port + self.index if port else 0

    def tag_logs(self) -> None:
        """Prefix the thread name of its log lines with ``p<index>``: the children of one
        supervisor write to the same stream."""
        tag = f"p{self.index}"

        def tagged(record: logging.LogRecord) -> bool:
            if not getattr(record, "jobqueue_tagged", False):
                record.threadName = f"{tag} {record.threadName}"
                record.jobqueue_tagged = True
            return True

        for handler in logging.getLogger().handlers:
            handler.addFilter(tagged)

    def watch(self, stop: Callable[[str], object]) -> None:
        """Call ``stop(why)`` once the supervisor is gone: on SIGHUP (the parent-death signal)
        and on end of file on the pipe. ``stop`` must be idempotent (``Worker.request_stop``:
        a second call, or a call after a signal, changes nothing), so the two never add up to
        a forced exit. From the main thread (the signal handler)."""

        def on_hangup(signum: int, frame: FrameType | None) -> None:
            stop("the supervisor is gone (SIGHUP)")

        signal.signal(PARENT_DEATH_SIGNAL, on_hangup)

        def read_pipe() -> None:
            try:
                while os.read(self.pipe, 1):
                    pass
            except OSError:
                pass
            stop(f"the supervisor (pid {self.supervisor_pid}) is gone")

        threading.Thread(target=read_pipe, name="supervisor-watch", daemon=True).start()
        if os.getppid() != self.supervisor_pid:  # gone before the handler was in place
            stop(f"the supervisor (pid {self.supervisor_pid}) is gone")


def supervised(environ: MutableMapping[str, str] | None = None) -> Child | None:
    """The :class:`Child` this process is, or ``None`` when no supervisor started it.

    Called first thing in ``flask worker``: it asks the kernel for SIGHUP when the parent dies
    (Linux), then exits at once if the supervisor is already gone (it died before that
    request). It takes :data:`CHILD_ENV` out of the environment and keeps the pipe from the
    processes a handler may start, so neither is inherited further.
    """
    raw = (os.environ if environ is None else environ).pop(CHILD_ENV, None)
    if raw is None:
        return None
    try:
        index, processes, supervisor_pid, pipe = (int(part) for part in raw.split(","))
    except ValueError:
        raise RuntimeError(f"{CHILD_ENV} is malformed: {raw!r}") from None
    child = Child(index, processes, supervisor_pid, pipe)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(PARENT_DEATH_SIGNAL), 0, 0, 0) != 0:
            log.warning(
                "PR_SET_PDEATHSIG failed (errno %d): the pipe alone watches the supervisor",
                ctypes.get_errno(),
            )
    if os.getppid() != supervisor_pid:
        log.warning("the supervisor (pid %d) is gone before this worker started: exiting", supervisor_pid)
        sys.exit(0)
    with contextlib.suppress(OSError):
        os.set_inheritable(pipe, False)
    return child
