"""Persistence plumbing: the engine and sessions, the declarative base, migrations."""
