"""A primary and a streaming standby on this machine, from the PostgreSQL binaries pgserver ships.

``python -m bench.failover`` and the replica and failover tests build one with
:meth:`Pair.build`: ``initdb`` a primary (TCP on 127.0.0.1, its own port), ``pg_basebackup`` it
into a standby (``standby.signal``, ``primary_conninfo`` naming it ``standby``), start both and
wait until the standby streams. ``synchronous=True`` makes the standby synchronous
(``synchronous_standby_names = 'standby'``, ``synchronous_commit = on``: a commit returns once
the standby has the WAL on disk), so a failover loses no committed transaction; otherwise it
is asynchronous.

Each server is a :class:`Server`: start, stop (``fast``: a clean shutdown), :meth:`Server.kill`
(SIGKILL to the postmaster and its children: a crash), :meth:`Server.promote`, and
:meth:`Server.follow` (start a stopped server as a standby of another: the old primary of a
planned switchover). ``fsync`` is off: a SIGKILLed server's writes stay in the OS's cache, and
only a power cut would lose them. Run as root, the servers run as the ``pgserver`` user (as
pgserver itself does).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg

STANDBY_NAME = "standby"


def bin_path(name: str) -> str:
    """A PostgreSQL program from pgserver's own installation."""
    from pgserver._commands import POSTGRES_BIN_PATH

    return str(Path(POSTGRES_BIN_PATH) / name)


def _run_as() -> str | None:
    """PostgreSQL refuses to run as root: then as pgserver's user, as pgserver does."""
    return "pgserver" if os.geteuid() == 0 else None


def _run(*args: str, timeout: float = 120) -> str:
    result = subprocess.run(
        list(args), check=False, capture_output=True, text=True, timeout=timeout, user=_run_as()
    )
    if result.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _owned(path: Path) -> Path:
    """``path`` created (if needed) and given to the servers' user."""
    path.mkdir(parents=True, exist_ok=True)
    user = _run_as()
    if user is not None:
        shutil.chown(path, user, user)
    return path


@dataclass
class Server:
    name: str
    pgdata: Path
    port: int
    log: Path

    def url(self, database: str = "postgres") -> str:
        """A libpq URL of ``database`` on this server alone."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        _run(bin_path("pg_ctl"), "-D", str(self.pgdata), "-l", str(self.log), "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        """``fast``: a clean shutdown (sessions ended, a shutdown checkpoint written)."""
        _run(bin_path("pg_ctl"), "-D", str(self.pgdata), "-m", mode, "-w", "-t", "60", "stop")

    def running(self) -> bool:
        pid = self.pid()
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    def pid(self) -> int | None:
        try:
            return int((self.pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None

    def kill(self) -> None:
        """SIGKILL the postmaster and every process of it: a crash, nothing flushed or said."""
        import psutil  # pgserver's own dependency

        pid = self.pid()
        if pid is None:
            return
        try:
            postmaster = psutil.Process(pid)
            children = postmaster.children(recursive=True)
        except psutil.Error:
            return
        for process in [postmaster, *children]:
            with contextlib.suppress(psutil.Error):
                process.send_signal(signal.SIGKILL)
        psutil.wait_procs([postmaster, *children], timeout=10)

    def promote(self) -> None:
        """End recovery: the standby takes writes (``pg_ctl promote`` waits until it does)."""
        _run(bin_path("pg_ctl"), "-D", str(self.pgdata), "-w", "-t", "60", "promote")

    def follow(self, primary: Server) -> None:
        """Start this (stopped, cleanly) server as an asynchronous standby of ``primary``."""
        _standby_settings(self, primary)
        self.start()

    def execute(self, statement: str, database: str = "postgres") -> list[tuple]:
        with psycopg.connect(self.url(database), autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(statement)
            return cursor.fetchall() if cursor.description else []

    def in_recovery(self) -> bool:
        return bool(self.execute("SELECT pg_is_in_recovery()")[0][0])


def _standby_settings(server: Server, primary: Server) -> None:
    """``server`` as a standby of ``primary``: never waiting for a standby of its own once
    promoted (``synchronous_standby_names`` empty), following the newest timeline."""
    auto = server.pgdata / "postgresql.auto.conf"
    lines = [
        f"port = {server.port}",
        f"primary_conninfo = 'host=127.0.0.1 port={primary.port} user=postgres "
        f"application_name={STANDBY_NAME}'",
        "synchronous_standby_names = ''",
        "recovery_target_timeline = 'latest'",
    ]
    text = auto.read_text() if auto.exists() else ""
    auto.write_text(text + "\n" + "\n".join(lines) + "\n")
    (server.pgdata / "standby.signal").touch()
    user = _run_as()
    if user is not None:
        for path in (auto, server.pgdata / "standby.signal"):
            shutil.chown(path, user, user)


PRIMARY_SETTINGS = """
listen_addresses = '127.0.0.1'
unix_socket_directories = ''
max_connections = 300
wal_level = replica
max_wal_senders = 10
wal_keep_size = '512MB'
hot_standby = on
hot_standby_feedback = on
wal_receiver_status_interval = 1s
fsync = off
synchronous_commit = on
"""


@dataclass
class Pair:
    """A primary and its streaming standby (see the module)."""

    root: Path
    primary: Server
    standby: Server
    synchronous: bool

    @classmethod
    def build(cls, root: Path | None = None, *, synchronous: bool = True) -> Pair:
        """``root``: a new folder for both servers (default: one under the temporary folder;
        its parents must let the servers' user through)."""
        root = _owned(root if root is not None else Path(tempfile.mkdtemp(prefix="jobqueue-pair-")))
        primary = Server("primary", root / "primary", free_port(), root / "primary.log")
        standby = Server("standby", root / "standby", free_port(), root / "standby.log")
        _run(bin_path("initdb"), "-D", str(primary.pgdata), "-U", "postgres", "--auth=trust", "-E", "UTF8",
             "--no-sync")  # fmt: skip
        settings = PRIMARY_SETTINGS + f"port = {primary.port}\n"
        if synchronous:
            settings += f"synchronous_standby_names = '{STANDBY_NAME}'\n"
        with open(primary.pgdata / "postgresql.conf", "a") as conf:
            conf.write(settings)
        primary.start()
        pair = cls(root, primary, standby, synchronous)
        try:
            _run(bin_path("pg_basebackup"), "-D", str(standby.pgdata), "-h", "127.0.0.1", "-p",
                 str(primary.port), "-U", "postgres", "-X", "stream", "-c", "fast", "--no-sync")  # fmt: skip
            _standby_settings(standby, primary)
            standby.start()
            pair.wait_streaming()
        except BaseException:
            pair.close()
            raise
        return pair

    def wait_streaming(self, timeout: float = 60) -> None:
        """Until the primary sees its standby streaming (and synchronous, when it is)."""
        want = "sync" if self.synchronous else "async"
        deadline = time.monotonic() + timeout
        while True:
            rows = self.primary.execute(
                f"SELECT state, sync_state FROM pg_stat_replication WHERE application_name = '{STANDBY_NAME}'"
            )
            if rows and rows[0][0] == "streaming" and rows[0][1] == want:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the standby is not streaming ({rows}); see {self.standby.log}")
            time.sleep(0.1)

    def url(self, database: str, *, form: str = "libpq") -> str:
        """The multi-host URL of ``database``: libpq's ``h1:p1,h2:p2`` form, or SQLAlchemy's
        ``?host=h1:p1&host=h2:p2`` (``form="sqlalchemy"``), with ``read-write`` sessions."""
        first, second = self.primary.port, self.standby.port
        if form == "sqlalchemy":
            return (
                f"postgresql+psycopg://postgres@/{database}?host=127.0.0.1:{first}&host=127.0.0.1:{second}"
                "&target_session_attrs=read-write"
            )
        return f"postgresql://postgres@127.0.0.1:{first},127.0.0.1:{second}/{database}?target_session_attrs=read-write"

    def create_database(self, name: str) -> None:
        self.primary.execute(f'CREATE DATABASE "{name}"')

    def wait_replayed(self, timeout: float = 30) -> None:
        """Until the standby has replayed everything the primary has written so far."""
        target = self.primary.execute("SELECT pg_current_wal_lsn()")[0][0]
        deadline = time.monotonic() + timeout
        while True:
            done = self.standby.execute(f"SELECT pg_last_wal_replay_lsn() >= '{target}'::pg_lsn")[0][0]
            if done:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("the standby did not catch up")
            time.sleep(0.05)

    def close(self) -> None:
        """Stop both servers (at once) and delete their folders."""
        for server in (self.primary, self.standby):
            if server.running():
                with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                    server.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def pair(root: Path | None = None, *, synchronous: bool = True) -> Iterator[Pair]:
    """:meth:`Pair.build`, closed at the end."""
    built = Pair.build(root, synchronous=synchronous)
    try:
        yield built
    finally:
        built.close()
