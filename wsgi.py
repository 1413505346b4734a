"""The gunicorn and ``flask --app wsgi`` target."""

from dashboard import create_app

app = create_app()
