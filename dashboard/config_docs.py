"""What each setting does, one or two sentences per environment variable.

The settings classes (:mod:`.config`, :mod:`.config_ops`) declare each setting as a field;
:func:`.config_parsers.env` puts the sentence kept here under its name into the field's
metadata (``doc``), and the documentation's configuration page is generated from that metadata
(``python -m scripts.docs``). A setting without a sentence here fails the documentation tests, so
a new setting is documented when it is added. Written in Markdown (backticks for code).
"""

from __future__ import annotations

SETTING_DOCS: dict[str, str] = {
    "JOB_WORKER_THREADS": "Worker threads per `flask worker` process.",
    "JOB_WORKER_PROCESSES": (
        "Worker processes `flask worker` runs, each with `JOB_WORKER_THREADS` threads; `auto`: one per "
        "CPU of the host. More than 1 starts a supervisor that runs them, restarts one that dies and "
        "stops them all on SIGINT/SIGTERM."
    ),
    "JOB_WORKER_POLL_INTERVAL_MS": (
        "Sleep when no job is claimable: shorter if a full rate window opens sooner, longer (up to"
        " 30 s, while LISTEN is up) if every served queue waits for its window."
    ),
    "JOB_WORKER_LEASE_SECONDS": "Lease of a running attempt.",
    "JOB_WORKER_CLEANUP_INTERVAL_SECONDS": (
        "How often each thread, and each `flask worker`'s rescuer, recovers expired leases."
    ),
    "JOB_WORKER_CLEANUP_BATCH_SIZE": "Most expired leases recovered per pass.",
    "JOB_WORKER_BACKOFF_BASE_SECONDS": "Retry backoff base.",
    "JOB_WORKER_BACKOFF_MAX_SECONDS": "Retry backoff cap.",
    "JOB_WORKER_MAX_ATTEMPTS_DEFAULT": "`max_attempts` of jobs that do not say.",
    "JOB_WORKER_LOG_LEVEL": "`DEBUG` logs every poll, claim and execution.",
    "JOB_HANDLER_MODULES": (
        "Comma-separated modules imported at start (web and worker) to register job types."
    ),
    "JOB_WORKER_BATCH_SIZE": (
        "Jobs claimed in one statement (batch mode); at most twice this many held claimed ahead of the "
        "threads; 1 = one claim per thread."
    ),
    "JOB_WORKER_LISTEN": "Wake idle threads on `NOTIFY` instead of waiting for the next poll.",
    "JOB_WORKER_QUEUES": (
        "The named queues this worker claims from, comma separated; unset or blank: every queue, "
        "including ones that first appear later."
    ),
    "JOB_WORKER_SCHEDULES": (
        "Fire due schedules (recurring jobs) in this worker; `false` opts it out: it neither syncs "
        "the declared schedules nor fires them."
    ),
    "JOB_DEMO_HANDLERS": "Register the `demo.*` job types (web and worker); unset: follows `DEBUG`.",
    "JOB_WORKER_SHUTDOWN_TIMEOUT_SECONDS": (
        "After SIGINT/SIGTERM, how long running jobs may take before they are handed back (requeued at "
        "once) and the worker exits; `0`: no limit."
    ),
    "JOB_WORKER_HEARTBEAT_SECONDS": (
        "How often each worker process reports in (`jobs_worker`); stale after 3 missed."
    ),
    "JOB_WORKER_PROGRESS_FLUSH_MS": (
        "A handler's pending `progress()` report is written within this long; a handler that ends sooner "
        "has it written with its settle statement."
    ),
    "DATABASE_URL": (
        "`postgresql://…` or `postgresql+psycopg://…`, used as is. Unset: the `POSTGRES_*` settings when "
        "`POSTGRES_HOST` is set, else an embedded PostgreSQL 16 (`pgserver`) in the instance folder, "
        "shared by web and worker."
    ),
    "POSTGRES_DB": "Database name, with `POSTGRES_HOST`.",
    "POSTGRES_USER": "Database user, with `POSTGRES_HOST`.",
    "POSTGRES_PASSWORD": "Database password, with `POSTGRES_HOST`.",
    "POSTGRES_HOST": "Database host, used when `DATABASE_URL` is unset.",
    "POSTGRES_PORT": "Database port, with `POSTGRES_HOST`.",
    "POSTGRES_CONN_MAX_AGE": (
        "Seconds before a pooled connection is recycled; 0 keeps it until it fails (pre-ping replaces "
        "broken ones)."
    ),
    "DEBUG": (
        "Development mode: no sign-in unless users or tokens are configured; `false` requires a real "
        "`SECRET_KEY` and a credential (or `AUTH_DISABLED`)."
    ),
    "SECRET_KEY": (
        "Signs sessions and CSRF tokens; with `DEBUG=false`, at least 32 characters, 12 of them distinct,"
        " about 128 bits by its alphabet, and not the development key."
    ),
    "ALLOWED_HOSTS": "Trusted `Host` headers (`*` for any).",
    "CORS_ALLOWED_ORIGINS": (
        "Browser origins allowed to call the API (in development, localhost origins are allowed too)."
    ),
    "ENABLE_DEBUG_TOOLBAR": (
        "Flask-DebugToolbar for requests from `INTERNAL_IPS`; never with a credential configured or "
        "through a proxy; unset: follows `DEBUG`."
    ),
    "INTERNAL_IPS": "Who sees the debug toolbar.",
    "TIME_ZONE": "Time zone of timestamps in JSON and on pages.",
    "MAX_CONTENT_LENGTH": "Largest request body in bytes.",
    "STATS_EXACT_BELOW_ROWS": "Below this many jobs (planner estimate) stats are counted exactly.",
    "STATS_REFRESH_SECONDS": (
        "Above it, how old the cached succeeded/failed totals may get before a background recount."
    ),
    "DASHBOARD_QUERY_TIMEOUT_MS": (
        "`statement_timeout` of each overview panel's reads (a panel past it is left out, the page still "
        "renders) and of every API request's reads (503 past it); 0: none."
    ),
    "API_OFFSET_MAX": "The deepest `offset` `GET /api/jobs/` serves (400 past it).",
    "AUTH_DISABLED": "`true` serves with no sign-in even with `DEBUG=false` (a banner says so).",
    "DASHBOARD_USERS": (
        "Dashboard users, `name:role:hash` separated by commas or newlines; role `viewer` or `operator`; "
        "hash from `flask --app wsgi hash-password`. `DASHBOARD_USERS_FILE` names a file of more, one per"
        " line."
    ),
    "API_TOKENS": (
        "API tokens, `name:role:token` or `name:role:sha256:<hex digest>`, from `flask --app wsgi new-"
        "token`. `API_TOKENS_FILE` names a file of more, one per line."
    ),
    "SESSION_LIFETIME_HOURS": (
        "A dashboard session ends this long after its sign-in, however often it is used."
    ),
    "SESSION_COOKIE_SECURE": (
        "Always mark the session cookie `Secure` (it already is on every HTTPS request)."
    ),
    "SIGNIN_MAX_FAILURES_PER_USER": (
        "Failed sign-ins for one user name from one client address within the window before that address "
        "gets 429 for that name."
    ),
    "SIGNIN_MAX_FAILURES_PER_ADDRESS": (
        "Distinct user names that may fail from one client address within the window before it gets 429 "
        "for any other name."
    ),
    "SIGNIN_WINDOW_SECONDS": "How far back failed sign-ins count.",
    "SIGNIN_SLOW_AFTER_FAILURES_PER_USER": (
        "Failed sign-ins for one user name from all addresses within the window after which each address "
        "gets one failure for it per window."
    ),
    "FORWARDED_ALLOW_IPS": (
        "Proxies (addresses or networks, or `*`) trusted for `X-Forwarded-Proto` (gunicorn) and for "
        "`X-Forwarded-For` (the sign-in throttle's client address)."
    ),
    "JOB_TYPES_STRICT": (
        "`true`: the API, bulk create and the create form refuse job types not registered in the web "
        "process; `false`: any type of 1 to 120 characters (a worker without its handler fails the "
        "attempt)."
    ),
    "INSTANCE_PATH": "The Flask instance folder; the embedded database keeps its data in `pgdata` under it.",
    "AUTO_MIGRATE": (
        "Apply migrations at start; unset: on for the embedded database, off otherwise (run `flask --app "
        "wsgi db upgrade`)."
    ),
    "LOG_FORMAT": "`json`: web (app and gunicorn) and worker write one JSON object per line.",
    "METRICS_TOKEN": (
        "A bearer token for `GET /metrics` only (at least 32 characters); any `API_TOKENS` token works too."
    ),
    "METRICS_QUEUE_LABELS": (
        "`/metrics`: how many queues (those with the most live jobs) keep their own `queue` label; the "
        'rest are summed as `queue="other"`.'
    ),
    "METRICS_TYPE_LABELS": (
        "`/metrics`: how many job types (those with the most live jobs) keep their own `type` label; the "
        'rest are summed as `type="other"`.'
    ),
    "JOB_RETENTION_SUCCEEDED": "Days a succeeded job is kept after `finished_at`; `0` keeps forever.",
    "JOB_RETENTION_FAILED": "The same for failed jobs.",
    "JOB_RETENTION_INTERVAL_SECONDS": "How often a worker process runs a retention pass.",
    "JOB_WORKER_METRICS_PORT": (
        "Port of a worker process's own `/metrics`; `flask worker --metrics-port` overrides it."
    ),
    "JOB_WORKER_METRICS_HOST": (
        "Address that endpoint binds (`0.0.0.0` to let a Prometheus on another host scrape it)."
    ),
    "DATABASE_DIRECT_URL": (
        "A direct PostgreSQL URL for what cannot go through a pooler (LISTEN); setting it declares "
        "`DATABASE_URL` a pooler."
    ),
    "DATABASE_POOLED": (
        "`DATABASE_URL` is a transaction pooler (PgBouncer): no prepared statements, no session `SET`; "
        "unset: true when `DATABASE_DIRECT_URL` is set."
    ),
    "DATABASE_KEEPALIVES_IDLE_SECONDS": (
        "TCP keepalive probes on every database connection (the pools', the worker's LISTEN) after this "
        "much silence..."
    ),
    "DATABASE_KEEPALIVES_INTERVAL_SECONDS": "... then one every this many seconds ...",
    "DATABASE_KEEPALIVES_COUNT": "... and the connection is closed after this many unanswered.",
    "DATABASE_TCP_USER_TIMEOUT_SECONDS": (
        "A connection whose sent data (or probes) stay unacknowledged this long is closed; `0`: the OS "
        "default. With the defaults a dead connection is found within about 20 s. TCP only (a Unix socket"
        " needs none)."
    ),
}
