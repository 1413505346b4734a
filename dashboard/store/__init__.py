"""The store: models, statements, state transitions and reads of the job queue.

Nothing in this package imports ``flask.request``, ``g``, sessions, templates or threads of
the worker: the API, the dashboard, the CLI and the worker runtime are adapters over it.
"""
