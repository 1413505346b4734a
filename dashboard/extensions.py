"""Extension instances, created once and bound to an app in ``create_app``."""

from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect
from htmx_flask import Htmx
from sqlalchemy import MetaData

# Alembic sees the same names the models declare; nothing relies on generated names.
db = SQLAlchemy(metadata=MetaData())
migrate = Migrate()
csrf = CSRFProtect()
htmx = Htmx()  # request.htmx (HX-Request, HX-Target, HX-Current-URL ...) and make_response
