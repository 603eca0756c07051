"""Where a run's id goes while the tick use case runs: the calcgraph functions entered with it
(or with an object whose `id` is it) among their arguments, and their files, from the door's
`tick` to its answer (issue 30's "walk" of `RunService.tick:run_id`, measured by running it).

A pytest plugin, run on one test that ticks a diamond to its end:

    PYTHONPATH=.:scripts .venv/bin/python -m pytest -p tick_walk -q \\
        "tests/runs/test_tick_statements_api.py::test_statements_do_not_grow_with_the_run[sqlite]"

It prints the count of functions and files and writes them, listed, to `TICK_WALK_OUT`
(default `tick-walk.json` in the temporary folder). Only the test's own thread is followed
(the in-process workers run on threads of their own); a coroutine's resumptions count once
per function, like its calls.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

DOORS = ("domain/execution/service.py", "domain/commit_wait/service.py")
"""The file of the tick use case (`ExecutionService.tick` before it was renamed `CommitWait`)."""

_run_ids: set[str] = set()
_functions: set[tuple[str, str]] = set()


def _carries(value: object) -> bool:
    if isinstance(value, str):
        return value in _run_ids
    if isinstance(value, int | float | bytes | dict | list | tuple):
        return False
    found = getattr(value, "id", None)
    return isinstance(found, str) and found in _run_ids


def _profile(frame: FrameType, event: str, arg: Any) -> None:
    if event != "call" or "/calcgraph/" not in frame.f_code.co_filename:
        return
    code = frame.f_code
    if code.co_name == "tick" and code.co_filename.endswith(DOORS):
        run_id = frame.f_locals.get("run_id")
        if isinstance(run_id, str):
            _run_ids.add(run_id)
    if not _run_ids:
        return
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    if any(_carries(frame.f_locals.get(name)) for name in names):
        _functions.add((code.co_filename.split("/calcgraph/")[-1], code.co_qualname))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    _run_ids.clear()
    _functions.clear()
    sys.setprofile(_profile)
    try:
        yield
    finally:
        sys.setprofile(None)
    files = sorted({path for path, _ in _functions})
    listed = sorted(f"{path}:{name}" for path, name in _functions)
    out = os.environ.get("TICK_WALK_OUT", os.path.join(tempfile.gettempdir(), "tick-walk.json"))
    with open(out, "w") as written:
        json.dump({"test": item.nodeid, "functions": listed, "files": files}, written, indent=1)
    sys.stdout.write(f"\ntick walk: {len(listed)} functions in {len(files)} files ({out})\n")
