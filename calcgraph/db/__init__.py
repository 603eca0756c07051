"""Persistence plumbing: the engine and sessions, the pool's defaults, the declarative base,
dialect helpers."""
