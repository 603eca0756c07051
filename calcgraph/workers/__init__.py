"""Adapters that run jobs: the broker and outbox, the actors (listed in `registry.py`), the
worker runtime, result cache, and the sandbox backends with their warm pool."""
