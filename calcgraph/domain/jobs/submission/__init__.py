"""Submitting jobs: an execute call's, and the node jobs of a tick (`service`)."""
