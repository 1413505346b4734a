"""The shop's migrations, run by Flask-Migrate (``flask --app shop db upgrade``)."""

from alembic import context
from flask import current_app

migrate = current_app.extensions["migrate"]
with migrate.db.engine.connect() as connection:
    context.configure(connection=connection, target_metadata=migrate.db.metadata)
    with context.begin_transaction():
        context.run_migrations()
