"""The statements of ``dashboard/store/*.sql``: each one used, each name used defined, and the
rules the loader (``store/sql.py``) holds them to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from psycopg.types.json import Jsonb
from sqlalchemy import exc as sa_exc

from dashboard.extensions import db
from dashboard.store import connection, sql

DASHBOARD = Path(sql.__file__).resolve().parents[1]
USE = re.compile(r"""\bquery\(\s*["']([^"']+)["']\s*\)""")


def names_used() -> set[str]:
    return {name for path in DASHBOARD.rglob("*.py") for name in USE.findall(path.read_text())}


def test_every_statement_is_used_and_every_name_used_is_defined():
    defined = set(sql.STATEMENTS)
    used = names_used()
    assert used - defined == set(), "used, but in no .sql file"
    assert defined - used == set(), "defined, but never used"
    with pytest.raises(KeyError, match="no statement named 'clam'"):
        sql.query("clam")


def test_each_statement_reads_whole_with_its_description():
    for statement in sql.STATEMENTS.values():
        assert statement.description and statement.source.endswith(".sql")
        assert "--" not in statement.sql  # the reader's comments are not sent
        assert statement.sql.lstrip().split()[0] in {"WITH", "SELECT"}, statement.name


def test_a_statement_without_its_description_is_refused():
    with pytest.raises(sql.StatementError, match=r"t\.sql, statement 'x': the line under the name"):
        sql.parse("-- name: x\nSELECT 1\n", "t.sql")
    with pytest.raises(sql.StatementError, match="no SQL under the description"):
        sql.parse("-- name: x\n-- Nothing.\n", "t.sql")
    with pytest.raises(sql.StatementError, match="SQL before the first"):
        sql.parse("SELECT 1\n-- name: x\n-- One.\nSELECT 1\n", "t.sql")


def test_a_name_given_twice_is_refused_across_files():
    one = "-- name: x\n-- One.\nSELECT 1\n"
    with pytest.raises(sql.StatementError, match=r"b\.sql: 'x' is already named in a\.sql"):
        sql.collect([("a.sql", one), ("b.sql", one)])


def test_the_clock_is_written_once_and_read_in_its_place():
    (statement,) = sql.parse("-- name: x\n-- One.\nSELECT {{clock}} AS at\n", "t.sql")
    assert statement.sql == f"SELECT {sql.CLOCK} AS at"
    with pytest.raises(sql.StatementError, match=r"statement 'x': the clock is written \{\{clock\}\}"):
        sql.parse(f"-- name: x\n-- One.\nSELECT {sql.CLOCK}\n", "t.sql")
    files = [path for path in (DASHBOARD / "store").rglob("*.sql")]
    assert files and not [path.name for path in files if sql.CLOCK in path.read_text()]
    assert sum(sql.CLOCK in statement.sql for statement in sql.STATEMENTS.values()) > 20


def test_events_are_inserted_with_the_one_column_list():
    assert sql.EVENT_COLUMNS == ("job_id", "type", "attempt", "worker_id", "message", "data", "created_at")
    for columns in ("(job_id, type, attempt, message, data, created_at)", ""):
        text = f"-- name: x\n-- One.\nINSERT INTO jobs_jobevent {columns} SELECT 1\n"
        with pytest.raises(sql.StatementError, match="events are inserted as"):
            sql.parse(text, "t.sql")


def test_jsonb_parameters_are_read_from_their_casts_and_constants_bound_by_the_store(app):
    (statement,) = sql.parse(
        "-- name: x\n-- One.\n"
        "SELECT CAST(:doc AS jsonb) -> 'a' AS a, :plain AS plain, :notify_channel AS channel,\n"
        "       :lease_expired_prefix AS prefix\n",
        "t.sql",
    )
    assert statement.jsonb == {"doc"}
    expected = {"a": 1, "plain": "p", "channel": sql.NOTIFY_CHANNEL, "prefix": sql.LEASE_EXPIRED_PREFIX}
    with connection.connect() as conn:  # the workers' path: psycopg, compiled once
        assert connection.fetch_rows(conn, statement.clause, {"doc": {"a": 1}, "plain": "p"}) == [expected]
    with db.engine.connect() as conn:  # SQLAlchemy's
        row = conn.execute(statement.clause, {"doc": {"a": 1}, "plain": "p"}).mappings().one()
        assert dict(row) == expected
    assert sql.STATEMENTS["create"].jsonb == {"payload", "event_data"}
    assert sql.STATEMENTS["claim"].jsonb == frozenset()


def test_a_dict_for_a_parameter_not_cast_to_jsonb_is_not_sent_as_one(app):
    """The rule cuts both ways: only a CAST makes a parameter jsonb."""
    (statement,) = sql.parse("-- name: x\n-- One.\nSELECT :doc AS doc\n", "t.sql")
    refused = pytest.raises(sa_exc.ProgrammingError, match="cannot adapt type 'dict'")
    with connection.connect() as conn, refused:
        connection.fetch_rows(conn, statement.clause, {"doc": {"a": 1}})
    create = connection._compile(sql.query("create"))
    args = connection._args(create, {name: {} for name in create.names})
    assert isinstance(args[create.names.index("payload")], Jsonb)
    assert not isinstance(args[create.names.index("type")], Jsonb)


def test_a_statement_is_sent_with_numbered_placeholders_converted_once(app):
    """Each named parameter becomes one $n (a name used twice is one $n), a literal % stays
    one %, and a parameter the caller did not give is named in the error, before anything is sent."""
    (statement,) = sql.parse(
        "-- name: x\n-- One.\n"
        "SELECT :a AS a, :b AS b, :a AS again, 'x%' AS pct, :notify_channel AS channel\n",
        "t.sql",
    )
    compiled = connection._compile(statement.clause)
    assert compiled.names == ("a", "b", "notify_channel")
    assert (
        "$1" in compiled.sql and "$3" in compiled.sql and "'x%'" in compiled.sql and "%(" not in compiled.sql
    )
    with connection.connect() as conn:
        (row,) = connection.fetch_rows(conn, statement.clause, {"a": 1, "b": "two"})
        assert row == {"a": 1, "b": "two", "again": 1, "pct": "x%", "channel": sql.NOTIFY_CHANNEL}
        with pytest.raises(KeyError, match="'b'"):
            connection.fetch_rows(conn, statement.clause, {"a": 1})


def test_values_written_out_in_statements_are_their_constants():
    """A statement (or a predicate that must match an index's) writes a few of the store's
    constants out whole instead of assembling them: each still says what the constant does."""
    from dashboard.config.rules import DEFAULT_QUEUE
    from dashboard.store import planner_stats
    from dashboard.store.reads import lists

    below = planner_stats.CUSTOM_PLANS_BELOW_PAGES
    assert f"< {below} * current_setting('block_size')" in planner_stats.CUSTOM_PLANS_WHILE_SMALL
    assert lists.IN_NAMED_QUEUE.text == f"queue <> '{DEFAULT_QUEUE}'"
    assert set(planner_stats.ANALYZE) == set(planner_stats.TABLES)
    assert all(command.endswith(f" {table}") for table, command in planner_stats.ANALYZE.items())


def test_a_connection_keeps_one_cursor_until_its_psycopg_connection_is_replaced(app):
    """fetch_rows reuses one cursor per psycopg connection (its adapters found once); after an
    error the same cursor still answers, and once the connection under it was invalidated the
    next statement runs on a new cursor of the new connection."""
    (statement,) = sql.parse("-- name: y\n-- One.\nSELECT CAST(:a AS integer) + 1 AS b\n", "t.sql")
    (broken,) = sql.parse("-- name: z\n-- One.\nSELECT 1 / CAST(:a AS integer) AS c\n", "t.sql")
    with connection.connect() as conn:
        assert connection.fetch_rows(conn, statement.clause, {"a": 1}) == [{"b": 2}]
        first = conn.info[connection._CURSOR]
        with pytest.raises(sa_exc.DataError):
            connection.fetch_rows(conn, broken.clause, {"a": 0})
        assert connection.fetch_rows(conn, statement.clause, {"a": 2}) == [{"b": 3}]
        assert conn.info[connection._CURSOR] is first
        old = connection.raw_connection(conn)
        conn.invalidate()  # as after a connection fault: the pool replaces what is under it
    with connection.connect() as conn:
        assert connection.fetch_rows(conn, statement.clause, {"a": 3}) == [{"b": 4}]
        kept = conn.info[connection._CURSOR]
        assert kept is not first and kept.connection is connection.raw_connection(conn) is not old
