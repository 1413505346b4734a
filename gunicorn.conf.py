"""gunicorn settings, read automatically from the working directory.

Threads keep the HTMX polling of several open dashboards from queueing behind each other.
``PORT`` (set by Procfile runners and platforms) wins over the local default.
"""

import os

bind = [f"0.0.0.0:{os.environ['PORT']}"] if os.environ.get("PORT") else ["127.0.0.1:8000"]
workers = int(os.environ.get("WEB_CONCURRENCY", "2"))
worker_class = "gthread"
threads = int(os.environ.get("WEB_THREADS", "4"))
timeout = 30
accesslog = "-"
