"""The queue engine: models, state transitions, reads, backoff, handlers and the worker.

Nothing in this package imports ``flask.request``, ``g``, sessions or templates: the API,
the dashboard and the ``flask worker`` command are adapters over it.
"""
