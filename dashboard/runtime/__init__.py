"""The worker runtime: threads that claim jobs through the store, run handlers and settle them.

Nothing here writes SQL of its own: every state change is a call into ``dashboard.store``.
"""
