"""Every database connection has TCP keepalives and ``tcp_user_timeout`` (libpq options), so a
connection whose peer went silent is closed within a bounded time instead of the operating
system's two hours: the pool's connections and a worker's LISTEN connection alike. Read back
from the sockets themselves (``getsockopt``), over TCP through a local proxy (the test
database may sit on a Unix socket, where the options do not apply)."""

from __future__ import annotations

import os
import socket
from typing import Any

import psycopg
import pytest

from dashboard.config import ConfigError, OpsSettings, Settings, settings_of
from dashboard.database import engine_options, tcp_connect_args
from dashboard.extensions import db
from dashboard.runtime.worker import Worker
from tests.support.netproxy import proxied_app

DEFAULTS = {"keepalive": 1, "idle": 10, "interval": 5, "count": 3, "user_timeout_ms": 20_000}


def socket_options(raw: psycopg.Connection[Any]) -> dict[str, int]:
    """The TCP options of a psycopg connection's socket, read from the kernel."""
    sock = socket.socket(fileno=os.dup(raw.pgconn.socket))
    try:
        return {
            "keepalive": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "idle": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            "interval": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            "count": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            "user_timeout_ms": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
        }
    finally:
        sock.close()  # the duplicate only


def pooled_socket_options(app) -> dict[str, int]:
    with app.app_context(), db.engine.connect() as conn:
        return socket_options(conn.connection.driver_connection)


def test_pool_connections_detect_a_dead_peer_within_bounded_time(database_url):
    with proxied_app(database_url) as (app, _proxy):
        assert pooled_socket_options(app) == DEFAULTS


def test_the_settings_set_them(database_url):
    config = {
        "DATABASE_KEEPALIVES_IDLE_SECONDS": "7",
        "DATABASE_KEEPALIVES_INTERVAL_SECONDS": "2",
        "DATABASE_KEEPALIVES_COUNT": "4",
        "DATABASE_TCP_USER_TIMEOUT_SECONDS": "12.5",
    }
    with proxied_app(database_url, **config) as (app, _proxy):
        assert pooled_socket_options(app) == {
            "keepalive": 1, "idle": 7, "interval": 2, "count": 4, "user_timeout_ms": 12_500,
        }  # fmt: skip
    with proxied_app(database_url, DATABASE_TCP_USER_TIMEOUT_SECONDS="0") as (app, _proxy):
        assert pooled_socket_options(app)["user_timeout_ms"] == 0  # the operating system's default


def test_a_workers_listen_connection_has_them_too(database_url):
    with proxied_app(database_url) as (app, _proxy):
        worker = Worker(app, settings_of(app).worker)
        listener = worker.make_listener()
        assert listener is not None
        with listener.connect() as conn:
            assert socket_options(conn) == DEFAULTS


def test_they_go_with_every_connection_and_with_the_pooler_options():
    pooled = Settings.from_env({"DATABASE_DIRECT_URL": "postgresql://db/direct"})
    args = engine_options(pooled)["connect_args"]
    assert args == {
        "connect_timeout": 5,
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": 20_000,
        "prepare_threshold": None,
    }
    assert tcp_connect_args(OpsSettings()) == {k: v for k, v in args.items() if k.startswith(("keep", "tcp"))}


@pytest.mark.parametrize(
    "name, value",
    [
        ("DATABASE_KEEPALIVES_IDLE_SECONDS", "0"),
        ("DATABASE_KEEPALIVES_INTERVAL_SECONDS", "soon"),
        ("DATABASE_KEEPALIVES_COUNT", "-1"),
        ("DATABASE_TCP_USER_TIMEOUT_SECONDS", "-5"),
    ],
)
def test_a_malformed_value_stops_the_start_naming_it(name, value):
    with pytest.raises(ConfigError, match=name):
        Settings.from_env({name: value})
