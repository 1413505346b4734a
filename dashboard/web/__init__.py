"""Dashboard blueprint: server-rendered pages (issue 5 fills it in)."""

from flask import Blueprint

bp = Blueprint("web", __name__)
