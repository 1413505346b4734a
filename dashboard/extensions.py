"""Extension instances, created once and bound to an app in ``create_app``."""

from flask import current_app
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect
from htmx_flask import Htmx
from sqlalchemy import Engine, MetaData

# Alembic sees the same names the models declare; nothing relies on generated names.
db = SQLAlchemy(metadata=MetaData())
migrate = Migrate()
csrf = CSRFProtect()
htmx = Htmx()  # request.htmx (HX-Request, HX-Target, HX-Current-URL ...) and make_response


def engine() -> Engine:
    """The SQLAlchemy engine of the Flask-SQLAlchemy instance registered on the current app: :data:`db`
    in the standalone app, the host's own ``db`` where ``JobQueue`` is mounted in a host's
    app (its tables live in the host's database). Needs an application context."""
    sqlalchemy: SQLAlchemy = current_app.extensions["sqlalchemy"]
    return sqlalchemy.engine
