"""A host application of its own, with JobQueue mounted in it, for the embedding tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask, Request
from flask_sqlalchemy import SQLAlchemy
from sqlalchemy import MetaData, String
from sqlalchemy.orm import Mapped, mapped_column

from dashboard import JobQueue
from dashboard.auth.principals import token_digest

PREFIX = "/ops/jobs"
OPERATOR_TOKEN = "host-deploy-token-" + "o" * 40
VIEWER_TOKEN = "host-grafana-token-" + "v" * 40
HOST_TOKENS = ",".join(
    [f"deploy:operator:{OPERATOR_TOKEN}", f"grafana:viewer:sha256:{token_digest(VIEWER_TOKEN).hex()}"]
)


def role_header(request: Request) -> str | None:
    """The host's own sign-in, as a test stands it in: the role its session would give."""
    return request.headers.get("X-Host-Role")


def make_host(
    database_url: str, setup: Callable[[Flask], None] | None = None, **config: Any
) -> tuple[Flask, SQLAlchemy, type]:
    """A Flask app with its own Flask-SQLAlchemy ``db``, an ``Order`` model and a route of its
    own, and the queue mounted at ``/ops/jobs`` behind ``role_header``."""
    host = Flask("shop_host")
    host.config.update(
        SQLALCHEMY_DATABASE_URI=database_url,
        SECRET_KEY="host-secret-key-0123456789abcdef0123456789",
        TESTING=True,
        API_TOKENS=HOST_TOKENS,
        JOB_DEMO_HANDLERS="true",
        **config,
    )
    db = SQLAlchemy(metadata=MetaData())

    class Order(db.Model):  # type: ignore[name-defined,misc]
        __tablename__ = "shop_order"
        id: Mapped[int] = mapped_column(primary_key=True)
        item: Mapped[str] = mapped_column(String(50))

    db.init_app(host)

    @host.get("/")
    def home() -> str:
        return "the shop"

    @host.post("/orders")
    def order() -> tuple[str, int]:
        return "ordered", 201

    if setup is not None:
        setup(host)
    JobQueue(host, db=db, url_prefix=PREFIX, authorize=role_header)
    return host, db, Order


@contextmanager
def host_with_tables(
    database_url: str, setup: Callable[[Flask], None] | None = None
) -> Iterator[tuple[Flask, SQLAlchemy, type]]:
    """:func:`make_host` with the host's own tables created, and dropped after."""
    made = make_host(database_url, setup)
    host_app, db, _ = made
    with host_app.app_context():
        db.create_all()
    try:
        yield made
    finally:
        with host_app.app_context():
            db.drop_all()
            db.engine.dispose()
