"""JSON API blueprint, mounted at ``/api`` (issue 4 fills it in)."""

from flask import Blueprint

bp = Blueprint("api", __name__)
