"""The dashboard's blueprint; the view modules register their routes on it."""

from flask import Blueprint

from ..database import TEMPLATES_DIR

# The templates are also the blueprint's, so that a host's app (whose own template folder is
# its own) finds them; the standalone app's template folder is the same one.
bp = Blueprint("jobqueue_web", __name__, template_folder=TEMPLATES_DIR)
