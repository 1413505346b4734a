"""Debian's PgBouncer in front of the test database, in transaction pooling mode.

:func:`pgbouncer` starts ``/usr/sbin/pgbouncer`` on a free 127.0.0.1 port with ``auth_type =
trust`` (a test-only listener) and yields the libpq URL of the test database through it.
PgBouncer refuses to run as root: then it runs as the owner of the server's socket directory
(the embedded server's user) or ``nobody``. Skipped when PgBouncer is not installed, except
with ``CI=true``, where that is a failure (``scripts/test`` installs it).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.support.stack import free_port
from tests.support.waiting import wait_until

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"


def _run_as(host: str) -> str | None:
    if os.getuid() != 0:
        return None
    if host.startswith("/"):
        return pwd.getpwuid(os.stat(host).st_uid).pw_name
    return "nobody"


@contextmanager
def pgbouncer(libpq_url: str, workdir: Path, *, pool_size: int = 20) -> Iterator[str]:
    if not os.path.exists(PGBOUNCER):
        if os.environ.get("CI") == "true":
            pytest.fail("pgbouncer is not installed and CI=true: scripts/test installs it")
        pytest.skip("pgbouncer is not installed (apt-get install pgbouncer)")
    target = conninfo_to_dict(libpq_url)
    host, port = target.get("host") or "127.0.0.1", target.get("port") or "5432"
    user, dbname = target.get("user") or "postgres", target["dbname"]
    listen = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "users.txt").write_text(f'"{user}" ""\n')
    ini = workdir / "pgbouncer.ini"
    ini.write_text(
        f"""[databases]
{dbname} = host={host} port={port} dbname={dbname} user={user}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen}
unix_socket_dir =
auth_type = trust
auth_file = {workdir / "users.txt"}
pool_mode = transaction
default_pool_size = {pool_size}
max_client_conn = 500
ignore_startup_parameters = extra_float_digits,options
server_login_retry = 1
"""
    )
    password = f":{target['password']}" if target.get("password") else ""
    if password:  # a password-protected server: PgBouncer sends the one in the auth file
        (workdir / "users.txt").write_text(f'"{user}" "{target["password"]}"\n')
    for path in (workdir, ini, workdir / "users.txt"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    args = [PGBOUNCER, str(ini)]
    owner = _run_as(host)
    if owner:
        args[1:1] = ["-u", owner]
    log = open(workdir / "pgbouncer.log", "wb")  # noqa: SIM115  (closed below)
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    url = f"postgresql://{user}{password}@127.0.0.1:{listen}/{dbname}"

    def answers() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"pgbouncer exited: {(workdir / 'pgbouncer.log').read_text()}")
        try:
            with psycopg.connect(url, connect_timeout=2, prepare_threshold=None) as conn:
                return conn.execute("SELECT 1").fetchone() == (1,)
        except psycopg.OperationalError:
            return False

    try:
        wait_until(answers, 20, "pgbouncer to answer")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()
