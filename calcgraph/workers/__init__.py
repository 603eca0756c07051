"""Adapters that run jobs: sandbox backends and the warm pool (actors join them with issue 5)."""
