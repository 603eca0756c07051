"""The program a sandbox runs is one source: `runner.py` with `confine.py` in place of its import
(the sandbox has no calcgraph to import)."""

from __future__ import annotations

import ast
import subprocess
import sys

from calcgraph.workers.sandbox.session import runner_source


def test_the_sandbox_program_imports_nothing_of_calcgraph() -> None:
    tree = ast.parse(runner_source())
    modules = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {m for m in modules if m.startswith("calcgraph")}
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert {"confine", "proc_status", "main"} <= defined


def test_the_sandbox_program_runs_in_an_isolated_interpreter() -> None:
    # No configuration line: the runner ends at once, having defined everything.
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", runner_source()],
        input=b"",
        capture_output=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, b"")
