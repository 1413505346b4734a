"""A shop with orders, and the job queue mounted in it.

- ``POST /orders`` inserts an order and enqueues its receipt job in one transaction: the job
  exists only if the order commits (``?fail=1`` rolls the order back, and the job with it);
- ``flask --app shop worker`` runs the jobs (``shop_jobs.py``);
- the queue's dashboard is at ``/ops/jobs/``, behind the shop's own sign-in (``/login``);
  the shop's operators may act on jobs, its other staff may look.

Set it up::

    export SHOP_DATABASE_URL=postgresql+psycopg://localhost/shop
    flask --app shop db upgrade         # the shop's own migrations (alembic_version)
    flask --app shop jobqueue upgrade   # the queue's tables (jobqueue_alembic_version)
    flask --app shop run                # and, beside it: flask --app shop worker
"""

from __future__ import annotations

import os
from pathlib import Path

from flask import Flask, Request, abort, redirect, render_template_string, request, session, url_for
from flask_migrate import Migrate
from shop_models import Order, db
from werkzeug.wrappers import Response

from dashboard import JobQueue
from dashboard.jobs import enqueue

HERE = Path(__file__).resolve().parent
STAFF = {"olga": "operator", "vic": "viewer"}  # the shop's own users and what they may do with jobs

PAGE = """<!doctype html><title>Shop</title>
<p>{% if user %}Signed in as {{ user }} · <a href="/ops/jobs/">Jobs</a>
{% else %}<a href="{{ url_for('login') }}">Sign in</a>{% endif %}</p>
<form method="post" action="{{ url_for('place_order') }}">
  <input name="item" placeholder="item" required> <button>Order</button></form>
<ul>{% for order in orders %}<li data-order="{{ order.id }}">{{ order.item }}
  {{ "receipt sent" if order.receipt_sent else "receipt pending" }}</li>{% endfor %}</ul>"""

LOGIN = """<!doctype html><title>Sign in</title>
<form method="post"><input name="user" placeholder="olga or vic"> <button>Sign in</button></form>"""


def who_may(request: Request) -> str | None:
    """The queue's ``authorize``: the signed-in staff member's role, or ``None`` (refused)."""
    return STAFF.get(session.get("user", ""))


def create_shop() -> Flask:
    app = Flask(__name__)
    app.config.update(
        SQLALCHEMY_DATABASE_URI=os.environ.get("SHOP_DATABASE_URL", "postgresql+psycopg://localhost/shop"),
        SECRET_KEY=os.environ.get("SHOP_SECRET_KEY", "shop-example-only-secret-key-change-me-0123"),
        JOB_HANDLER_MODULES="shop_jobs",  # the queue reads its JOB_* settings from here too
    )
    db.init_app(app)
    Migrate(app, db, directory=str(HERE / "migrations"))
    JobQueue(app, db=db, url_prefix="/ops/jobs", authorize=who_may)

    @app.get("/")
    def home() -> str:
        orders = db.session.scalars(db.select(Order).order_by(Order.id)).all()
        return render_template_string(PAGE, orders=orders, user=session.get("user"))

    @app.route("/login", methods=["GET", "POST"])
    def login() -> str | Response:
        if request.method == "POST":
            user = request.form.get("user", "")
            if user not in STAFF:
                abort(403)
            session["user"] = user
            return redirect(url_for("home"), 303)
        return render_template_string(LOGIN)

    @app.post("/orders")
    def place_order() -> Response:
        """The order and its receipt job, in one transaction: both or neither."""
        order = Order(item=request.form.get("item", "")[:100] or "something")
        db.session.add(order)
        db.session.flush()  # the order's id, inside the transaction
        enqueue("shop.send_receipt", {"order_id": order.id}, connection=db.session)
        if request.args.get("fail"):  # something went wrong after the enqueue: nothing is kept
            db.session.rollback()
            abort(409, description="the order was rolled back, and its job with it")
        db.session.commit()
        return redirect(url_for("home"), 303)

    return app


app = create_shop()
