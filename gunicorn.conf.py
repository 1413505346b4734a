"""gunicorn settings, read automatically from the working directory.

Threads keep the HTMX polling of several open dashboards from queueing behind each other.
``PORT`` (set by Procfile runners and platforms) wins over the local default.
"""

import os


def _address() -> str:
    """``WEB_HOST`` when set; else every interface only in production (``DEBUG=false``, which
    refuses to serve without credentials): the development dashboard has no sign-in, so it
    listens on this machine alone, ``honcho start`` included."""
    host = os.environ.get("WEB_HOST", "").strip()
    if host:
        return f"[{host}]" if ":" in host and not host.startswith("[") else host
    production = os.environ.get("DEBUG", "").strip().lower() in {"0", "false", "no", "off"}
    return "0.0.0.0" if production else "127.0.0.1"


bind = [f"{_address()}:{os.environ.get('PORT', '').strip() or '8000'}"]
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "gthread"
threads = int(os.environ.get("WEB_THREADS", "4"))
timeout = 30
accesslog = "-"
# The same lines as gunicorn's own logger, without copying every header and environ entry per
# request for a format that names none (dashboard/ops/access_log.py). gunicorn swaps in its
# statsd logger only for its default class: with statsd_host set, set logger_class back too.
logger_class = "dashboard.ops.access_log.AccessLog"

# gunicorn's control socket (for `gunicornc`) is off unless GUNICORN_CONTROL_SOCKET names this
# instance's own path. Its default, $XDG_RUNTIME_DIR/gunicorn.ctl or $HOME/.gunicorn/gunicorn.ctl,
# is one path for every gunicorn a user runs: a second instance takes it over from the first, and
# a command meant for one reaches the other.
_control_socket = os.environ.get("GUNICORN_CONTROL_SOCKET", "").strip()
control_socket_disable = not _control_socket
if _control_socket:
    control_socket = _control_socket

# LOG_FORMAT=json: gunicorn's own lines (errors, access log) as JSON objects too.
if os.environ.get("LOG_FORMAT", "").strip().lower() == "json":
    _json_handler = {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "dashboard.ops.logs.JsonLines"}},
        "handlers": {"console": _json_handler, "error_console": _json_handler},
        "loggers": {
            "gunicorn.error": {"handlers": ["error_console"], "level": "INFO", "propagate": False},
            "gunicorn.access": {"handlers": ["console"], "level": "INFO", "propagate": False},
        },
    }


def post_worker_init(worker: object) -> None:
    """Once the app is loaded in a worker, take what it allocated at startup out of the cyclic
    garbage collector's reach (``gc.freeze``). Those objects live as long as the worker; left
    in, every full collection walks all of them (some 120,000), and a request that allocates a
    lot (a 1,000-job bulk create) triggers such collections: about a third of that request's
    CPU in the web process (docs/benchmarks.md)."""
    import gc

    gc.freeze()
