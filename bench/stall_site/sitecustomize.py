"""Loaded first by a `calcgraph serve` that a benchmark starts with `bench.stall_watch`'s
settings: it installs the stall watch from its file (the server does not import `bench`)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "_calcgraph_stall_watch", Path(__file__).resolve().parent.parent / "stall_watch.py"
)
if _spec is not None and _spec.loader is not None:
    _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
    _module.install()
