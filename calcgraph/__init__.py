"""calcgraph: typed, unit-aware engineering functions, run in sandboxes, composed into graphs."""

__version__ = "0.1.0"
