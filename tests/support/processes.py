"""Processes as Linux's ``/proc`` shows them: a supervisor's children, and whether a pid still runs.

A process that exited but was not reaped yet (a zombie, state ``Z``) does not run: after its
supervisor was killed, a child is reparented to an init that may be slow to reap it.
"""

from __future__ import annotations

import os
from pathlib import Path


def _stat(pid: int) -> list[str] | None:
    """``/proc/PID/stat``'s fields after the command name ([0] the state, [1] the parent's pid),
    or ``None`` when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def children_of(parent: int) -> set[int]:
    """The running processes whose parent is ``parent``."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat(int(entry))
        if fields is not None and fields[0] != "Z" and int(fields[1]) == parent:
            found.add(int(entry))
    return found
