"""Adapters that bring package source code in from outside (git)."""
