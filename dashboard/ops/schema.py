"""Is the database's schema the one this code was written for?

:func:`schema_state` compares ``alembic_version`` with the head of ``migrations/``:

- ``current``: at the head;
- ``behind``: an older revision (or none: never migrated): this code must not run on it;
- ``ahead``: a revision these scripts do not know, so a newer release migrated first (a
  rolling deploy). Migrations are additive, so this code keeps working; ready, with a note.

``/api/ready/`` answers 200 for ``current`` and ``ahead``, 503 otherwise; ``flask worker``
refuses ``behind`` (:func:`require_current`), naming the command to run.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from typing import Literal

from alembic.script import ScriptDirectory
from flask import Flask
from sqlalchemy import Connection, text

UPGRADE_COMMAND = "flask --app wsgi db upgrade"
VERSION_TABLES = ("alembic_version", "jobqueue_alembic_version")  # the standalone's, a host's mount's


@functools.cache
def _scripts() -> ScriptDirectory:
    from ..database import MIGRATIONS_DIR

    return ScriptDirectory(MIGRATIONS_DIR)


def script_head() -> str:
    head = _scripts().get_current_head()
    assert head is not None
    return head


@dataclass(frozen=True)
class SchemaState:
    state: Literal["current", "behind", "ahead"]
    database: str | None  # the database's revision (None: never migrated)
    head: str  # this code's head
    command: str = UPGRADE_COMMAND  # what brings the schema to head, as the mount runs it

    @property
    def ready(self) -> bool:
        return self.state in {"current", "ahead"}

    def reason(self) -> str:
        if self.state == "current":
            return f"schema at head {self.head}"
        if self.state == "ahead":
            return f"schema at {self.database}, newer than this code's head {self.head} (a newer release)"
        at = f"revision {self.database}" if self.database else "no revision (never migrated)"
        return f"schema at {at}, this code needs {self.head}: run `{self.command}`"


def schema_state(
    conn: Connection, version_table: str = "alembic_version", command: str = UPGRADE_COMMAND
) -> SchemaState:
    """Read the version table (``alembic_version``; a host's mount keeps the queue's
    revision in its own) on ``conn`` (a SQLAlchemy connection); raises if unreachable."""
    if version_table not in VERSION_TABLES:  # a fixed name, never interpolated from elsewhere
        raise ValueError(f"unknown version table {version_table!r}")
    head = script_head()
    exists = conn.execute(text("SELECT to_regclass(:t) IS NOT NULL"), {"t": version_table}).scalar()
    versions = []
    if exists:
        versions = [row[0] for row in conn.execute(text(f"SELECT version_num FROM {version_table}"))]
    if head in versions:
        return SchemaState("current", head, head, command)
    known = {rev.revision for rev in _scripts().walk_revisions()}
    version = versions[0] if versions else None
    if version is not None and version not in known:
        return SchemaState("ahead", version, head, command)
    return SchemaState("behind", version, head, command)


def current_state() -> SchemaState:
    """:func:`schema_state` on a fresh connection of the app's engine (app context needed)."""
    from flask import current_app

    from ..extensions import engine
    from ..mount import mount_of

    mount = mount_of(current_app)
    with engine().connect() as conn:
        return schema_state(conn, mount.version_table, mount.upgrade_command)


# How long a starting worker waits for a database it cannot reach (restarting, failing over to
# a standby) before it gives up.
START_WAIT_SECONDS = 60.0


def require_current(app: Flask, wait_seconds: float = START_WAIT_SECONDS) -> None:
    """Refuse to run code against an older schema (``flask worker``): a ``click`` error.

    A database that cannot be reached (or only a read-only standby, mid-failover) is waited
    for, up to ``wait_seconds``, trying again every second: a worker started during a
    failover starts once the new primary takes writes. Past that, the error propagates."""
    import click

    from ..database import is_connection_fault

    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            with app.app_context():
                state = current_state()
            break
        except Exception as error:
            if not is_connection_fault(error) or time.monotonic() >= deadline:
                raise
            first = str(getattr(error, "orig", None) or error).strip().splitlines()
            app.logger.warning("database unavailable at start (%s); retrying", first[0] if first else error)
            time.sleep(1.0)
    if state.state == "behind":
        raise click.ClickException(f"refusing to start: {state.reason()}")
    if state.state == "ahead":
        app.logger.warning("%s", state.reason())
