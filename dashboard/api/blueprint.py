"""The API's blueprint and its route registry; the view modules register their routes on it."""

from flask import Blueprint

from .registry import Registry

bp = Blueprint("jobqueue_api", __name__)
routes = Registry(bp)
