"""Adapters of the build pipeline: installing requirements, scanning, pushing."""
