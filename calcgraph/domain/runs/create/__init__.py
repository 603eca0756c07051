"""Run creation."""
