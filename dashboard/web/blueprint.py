"""The dashboard's blueprint; the view modules register their routes on it."""

from flask import Blueprint

bp = Blueprint("web", __name__)
