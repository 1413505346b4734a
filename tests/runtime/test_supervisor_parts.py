"""The supervisor's parts, one step at a time: the child's command line, why a child ended,
the restart backoff, and :meth:`Supervisor.step` over stand-in children (``python -c`` that
sleeps), without the worker. The real ``flask worker --processes`` is ``test_supervisor.py``."""

from __future__ import annotations

import logging
import signal
import sys

import pytest

from dashboard.runtime.supervisor import CHILD_ENV, Child, Slot, Supervisor, child_command, exit_reason
from tests.support.processes import running
from tests.support.waiting import wait_until

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def test_the_child_runs_the_same_command_line_without_its_processes_option():
    argv = [
        "python3",
        "-X",
        "dev",
        "-m",
        "flask",
        "--app",
        "wsgi",
        "worker",
        "--processes",
        "4",
        "--threads",
        "8",
    ]
    assert child_command(argv) == [
        sys.executable,
        "-X",
        "dev",
        "-m",
        "flask",
        "--app",
        "wsgi",
        "worker",
        "--threads",
        "8",
    ]
    script = [
        "/venv/bin/python",
        "/venv/bin/flask",
        "--app",
        "wsgi",
        "worker",
        "--processes=auto",
        "--no-listen",
    ]
    assert child_command(script) == [
        sys.executable,
        "/venv/bin/flask",
        "--app",
        "wsgi",
        "worker",
        "--no-listen",
    ]


def test_why_a_child_ended_names_the_signal_or_the_status():
    assert exit_reason(-signal.SIGKILL) == "was killed by SIGKILL"
    assert exit_reason(-signal.SIGSEGV) == "was killed by SIGSEGV"
    assert exit_reason(3) == "exited with status 3"
    assert exit_reason(0) == "exited with status 0"


def test_the_restart_delay_doubles_while_a_child_keeps_dying_and_resets_after_a_stable_run():
    slot = Slot(0)
    delays = []
    for n in range(9):
        slot.started_at = 100.0 * n
        delays.append(slot.backoff(100.0 * n + 1, 0.5, 60.0, 30.0))  # each died a second after its start
    assert delays == [0.5, 1, 2, 4, 8, 16, 32, 60, 60]
    slot.failures = 5000  # dying for days: still the longest delay, not an overflow
    assert slot.backoff(slot.started_at + 1, 0.5, 60.0, 30.0) == 60
    slot.started_at = 1000.0
    assert slot.backoff(1000.0 + 30, 0.5, 60.0, 30.0) == 0.5  # it had run 30 s: a fresh start


def test_a_child_knows_its_duties_port_and_details():
    first, second = Child(0, 3, 1234, 7), Child(2, 3, 1234, 8)
    assert first.duties and not second.duties
    assert (first.metrics_port(9100), second.metrics_port(9100), second.metrics_port(0)) == (9100, 9102, 0)
    assert second.details() == {"index": 2, "processes": 3, "supervisor_pid": 1234}


def environ_of(pid: int) -> bytes:
    with open(f"/proc/{pid}/environ", "rb") as environ:
        return environ.read()


@pytest.fixture
def supervisor():
    started = Supervisor(SLEEPER, 2, env={"PATH": "/usr/bin:/bin"}, restart_base_seconds=0.5)
    yield started
    started.forward(signal.SIGKILL)
    for slot in started.slots:
        if slot.proc is not None:
            slot.proc.wait(10)


def test_a_step_starts_each_child_in_its_own_session_and_restarts_one_that_died(supervisor, caplog):
    caplog.set_level(logging.INFO, logger="dashboard.runtime.supervisor")
    assert supervisor.step(0.0)
    first = supervisor.children()
    assert len(first) == 2 and all(running(pid) for pid in first)
    for pid in first:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        assert int(fields[3]) == pid  # a session of its own (its id is the pid): no terminal signal
        # The exec may still be laying out the new image when Popen returns (its error pipe closes
        # before the kernel has set the environment's bounds): /proc reads empty until it has.
        wait_until(lambda pid=pid: environ_of(pid), 10, "the child's environment in /proc")
        assert f"{CHILD_ENV}=".encode() in environ_of(pid)

    victim = supervisor.slots[1].proc
    victim.send_signal(signal.SIGKILL)
    wait_until(lambda: victim.poll() is not None, 10, "the child to die")
    assert supervisor.step(1.0)
    assert supervisor.slots[1].proc is None and supervisor.slots[1].restart_at == 1.5
    assert (
        f"worker process 1 (pid {victim.pid}) was killed by SIGKILL; starting it again in 0.5s" in caplog.text
    )
    assert supervisor.step(1.2) and supervisor.slots[1].proc is None  # not before its delay
    assert supervisor.step(1.5)
    assert len(supervisor.children()) == 2 and victim.pid not in supervisor.children()


def test_after_a_signal_the_children_are_not_restarted_and_the_step_ends_once_they_exited(supervisor):
    supervisor.step(0.0)
    children = supervisor.children()
    supervisor.stopping_by = signal.SIGTERM
    supervisor.forward(signal.SIGTERM)  # the stand-ins die of it
    wait_until(lambda: not supervisor.step(1.0), 10, "the supervisor's last step")
    assert supervisor.children() == [] and not any(running(pid) for pid in children)
    assert all(slot.pipe is None for slot in supervisor.slots)
