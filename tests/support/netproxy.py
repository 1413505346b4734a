"""A TCP proxy in front of PostgreSQL that a test can break, as a network would.

- :meth:`Proxy.black_hole`: nothing passes either way and nothing is refused (no RST, no FIN):
  the bytes wait, as behind a partition, until :meth:`Proxy.heal` lets them through;
- :meth:`Proxy.reset`: every open connection is cut with an RST (a failover, a reset
  middlebox); new connections are accepted as before;
- :meth:`Proxy.refuse` / :meth:`Proxy.accept`: new connections are refused (the port is
  closed) or accepted again.

It runs its own asyncio loop on a daemon thread. :func:`proxied_url` gives the SQLAlchemy URL
of the same database through it (TCP to 127.0.0.1, whatever the upstream is), and
:func:`proxied_app` an app whose every connection goes through it.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from flask import Flask
from sqlalchemy.engine import make_url


def upstream_of(url: str) -> tuple[str, int] | str:
    """The address behind a SQLAlchemy URL: ``(host, port)``, or a unix socket's path."""
    parsed = make_url(url)
    socket_dir = parsed.query.get("host")
    if isinstance(socket_dir, tuple):
        socket_dir = socket_dir[0]
    if socket_dir and str(socket_dir).startswith("/"):
        return f"{socket_dir}/.s.PGSQL.{parsed.port or 5432}"
    return (parsed.host or "127.0.0.1", parsed.port or 5432)


def proxied_url(url: str, port: int) -> str:
    """``url`` with its address replaced by the proxy's."""
    parsed = make_url(url)
    query = {k: v for k, v in parsed.query.items() if k != "host"}
    return parsed.set(host="127.0.0.1", port=port, query=query).render_as_string(hide_password=False)


class Proxy:
    def __init__(self, upstream: tuple[str, int] | str) -> None:
        self.upstream = upstream
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="netproxy", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._flowing: asyncio.Event | None = None
        self._pairs: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._serving: set[asyncio.Task[None]] = set()
        self.accepted = 0  # connections accepted so far

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    def start(self) -> int:
        self._thread.start()
        self._flowing = self._run(self._event())
        self._run(self._listen())
        return self.port

    async def _event(self) -> asyncio.Event:
        event = asyncio.Event()
        event.set()
        return event

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        task = asyncio.current_task()
        assert task is not None
        self._serving.add(task)
        try:
            await self._forward(reader, writer)
        finally:
            self._serving.discard(task)

    async def _forward(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if isinstance(self.upstream, str):
                up_reader, up_writer = await asyncio.open_unix_connection(self.upstream)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            _cut(writer)
            return
        pair = (writer, up_writer)
        self._pairs.add(pair)
        try:
            await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))
        finally:
            self._pairs.discard(pair)
            for side in pair:
                side.close()
                with suppress(ConnectionError, OSError):
                    await side.wait_closed()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        try:
            while data := await reader.read(65536):
                await self._flowing.wait()  # black-holed: hold the bytes, read no more
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()

    @property
    def open_connections(self) -> int:
        """Connections forwarded right now."""
        return len(self._pairs)

    def black_hole(self) -> None:
        assert self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.clear)

    def heal(self) -> None:
        assert self._flowing is not None
        self._loop.call_soon_threadsafe(self._flowing.set)

    def reset(self) -> int:
        """Cut every open connection with an RST, both sides; returns how many."""

        async def cut() -> int:
            pairs = list(self._pairs)
            for pair in pairs:
                for side in pair:
                    _cut(side)
            return len(pairs)

        return self._run(cut())

    def refuse(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
                await self._server.wait_closed()
                self._server = None

        self._run(close())

    def accept(self) -> None:
        self._run(self._listen())

    def stop(self) -> None:
        self.heal()
        self.refuse()
        self.reset()

        async def drained() -> None:
            if self._serving:
                await asyncio.wait(list(self._serving), timeout=5)

        self._run(drained())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


def _cut(writer: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER 0), not a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@contextmanager
def proxy_to(url: str) -> Iterator[Proxy]:
    """A started proxy to ``url``'s server, stopped at the end."""
    proxy = Proxy(upstream_of(url))
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()


@contextmanager
def proxied_app(database_url: str, **config: str) -> Iterator[tuple[Flask, Proxy]]:
    """A test app (``TEST_CONFIG`` and ``config``) on ``database_url``'s database, every
    connection through a new :class:`Proxy`."""
    from dashboard import create_app
    from dashboard.extensions import db
    from tests.conftest import TEST_CONFIG

    with proxy_to(database_url) as proxy:
        url = proxied_url(database_url, proxy.port)
        app = create_app({**TEST_CONFIG, "DATABASE_URL": url, "AUTO_MIGRATE": "false", **config})
        try:
            yield app, proxy
        finally:
            with app.app_context():
                db.engine.dispose()
