"""The calling convention (contract, section 7) and the error kinds (contract, section 4)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from calcgraph.workers.sandbox import (
    LIMIT_NAMES,
    NOT_ENFORCED,
    Limits,
    RunRequest,
    SandboxBackend,
    SandboxSpec,
    SandboxUnavailable,
    create_backend,
    limits_from,
)
from calcgraph.workers.sandbox.bwrap import BwrapBackend
from calcgraph.workers.sandbox.process import ProcessBackend
from tests.sandbox.conftest import (
    CodeFactory,
    Runner,
    sandbox_settings,
    skip_unless_process_backend,
)

BEAM = """
import math

def cantilever(length, force, youngs_modulus=210e9, inertia=8.0e-6):
    print(f"span {length} m, load {force} N")
    return {
        "deflection": force * length**3 / (3 * youngs_modulus * inertia),
        "moment": force * length,
    }
"""


class TestCallingConvention:
    def test_keyword_inputs_and_mapping_outputs(
        self, sandbox_backend: SandboxBackend, make_code: CodeFactory
    ) -> None:
        code_dir = make_code(beam=BEAM)
        request = RunRequest(
            code_dir, "beam:cantilever", {"length": 2.0, "force": 1000.0}, ("deflection", "moment")
        )
        result = sandbox_backend.run(request)
        assert result.status == "success", result
        assert result.outputs == {
            "deflection": pytest.approx(1000 * 8 / (3 * 210e9 * 8e-6)),
            "moment": 2000.0,
        }
        assert "span 2.0 m, load 1000.0 N" in result.logs
        assert result.error is None
        assert result.duration > 0

    def test_bare_value_for_one_output_port(self, run: Runner) -> None:
        result = run("def main(x):\n    return x * 2\n", {"x": 21}, ("doubled",))
        assert result.outputs == {"doubled": 42}

    def test_mapping_value_of_a_single_struct_port(self, run: Runner) -> None:
        source = "def main():\n    return {'force': 1.0, 'moment': 2.0}\n"
        assert run(source, ports=("torsor",)).outputs == {"torsor": {"force": 1.0, "moment": 2.0}}

    def test_bare_value_with_several_ports_is_a_user_error(self, run: Runner) -> None:
        result = run("def main():\n    return 3\n", ports=("a", "b"))
        assert result.status == "failed"
        assert result.error is not None
        assert result.error.kind == "user_error"
        assert "a, b" in result.error.message

    def test_unknown_output_keys_are_a_user_error(self, run: Runner) -> None:
        result = run("def main():\n    return {'a': 1, 'zzz': 2}\n", ports=("a", "b"))
        assert result.error is not None
        assert result.error.kind == "user_error"
        assert "zzz" in result.error.message

    def test_untyped_function_outputs(self, run: Runner) -> None:
        assert run("def main():\n    return {'k': 1}\n").outputs == {"k": 1}
        assert run("def main():\n    return [1, 2]\n").outputs == {"result": [1, 2]}

    def test_non_json_outputs_are_a_user_error(self, run: Runner) -> None:
        for value in ("float('nan')", "object()"):
            result = run(f"def main():\n    return {value}\n", ports=("v",))
            assert result.error is not None
            assert result.error.kind == "user_error", value

    def test_interpreter_is_whole(self, run: Runner) -> None:
        """The sandbox's interpreter and its libpython are one release (bwrap relocates it)."""
        source = (
            "import sys, sysconfig\ndef main():\n"
            "    return {'version': sys.version.split()[0],"
            " 'built': sysconfig.get_config_var('py_version')}\n"
        )
        outputs = run(source).outputs
        assert outputs is not None
        assert outputs["version"] == outputs["built"]

    def test_dotted_handler_attribute(self, run: Runner) -> None:
        source = "class Beam:\n    @staticmethod\n    def run(x):\n        return x\n"
        assert run(source, {"x": 1}, ("x",), handler="job:Beam.run").outputs == {"x": 1}

    def test_module_importing_a_sibling(
        self, sandbox_backend: SandboxBackend, make_code: CodeFactory
    ) -> None:
        code_dir = make_code(
            helpers="def area(b, h):\n    return b * h\n",
            section="from helpers import area\ndef main(b, h):\n    return area(b, h)\n",
        )
        result = sandbox_backend.run(
            RunRequest(code_dir, "section:main", {"b": 2, "h": 3}, ("area",))
        )
        assert result.outputs == {"area": 6}


class TestUserErrors:
    def test_exception_with_traceback_in_logs(self, run: Runner) -> None:
        source = (
            "def helper():\n    raise ValueError('negative span')\n\n"
            "def main():\n    print('before')\n    helper()\n"
        )
        result = run(source)
        assert result.status == "failed"
        assert result.error is not None
        assert result.error.kind == "user_error"
        assert result.error.message == "ValueError: negative span"
        assert "before" in result.logs
        assert "Traceback (most recent call last)" in result.logs
        assert "in helper" in result.logs
        assert "job.py" in result.logs
        assert "runner" not in result.logs  # the bootstrap's own frames are left out

    def test_missing_input_is_a_user_error(self, run: Runner) -> None:
        result = run("def main(length):\n    return length\n", {})
        assert result.error is not None
        assert result.error.kind == "user_error"
        assert "length" in result.error.message

    def test_exit_is_a_user_error(self, run: Runner) -> None:
        result = run("import sys\ndef main():\n    sys.exit(3)\n")
        assert result.error is not None
        assert result.error.kind == "user_error"
        assert "exit(3)" in result.error.message

    @pytest.mark.parametrize(
        ("source", "handler", "needle"),
        [
            ("raise ImportError('no numpy here')\n", "job:main", "no numpy here"),
            ("def main():\n    pass\n", "job:absent", "absent"),
            ("def main():\n    pass\n", "nonexistent:main", "nonexistent"),
            ("def main():\n    pass\n", "job", "module:callable"),
            ("main = 3\n", "job:main", "not callable"),
            ("def main(:\n", "job:main", "SyntaxError"),
        ],
        ids=[
            "import-fails",
            "missing-callable",
            "missing-module",
            "bad-handler",
            "not-callable",
            "syntax",
        ],
    )
    def test_handler_that_cannot_load(
        self, run: Runner, source: str, handler: str, needle: str
    ) -> None:
        result = run(source, handler=handler)
        assert result.status == "failed"
        assert result.error is not None
        assert result.error.kind == "user_error"
        assert needle in result.error.message + result.logs

    def test_sandbox_survives_a_user_error(
        self, sandbox_backend: SandboxBackend, make_code: CodeFactory
    ) -> None:
        code_dir = make_code(job="def main(x):\n    return 1 / x\n")
        with sandbox_backend.start(
            SandboxSpec(code_dir, "job:main", ("y",), Limits(timeout_seconds=20))
        ) as sandbox:
            assert sandbox.run({"x": 0}).error.kind == "user_error"  # type: ignore[union-attr]
            assert sandbox.alive
            assert sandbox.run({"x": 4}).outputs == {"y": 0.25}


class TestOtherKinds:
    def test_sandbox_killed_from_inside_is_a_sandbox_error(self, run: Runner) -> None:
        result = run("import os, signal\ndef main():\n    os.kill(os.getpid(), signal.SIGKILL)\n")
        assert result.error is not None
        assert result.error.kind == "sandbox_error"

    def test_import_that_hangs_is_a_timeout(self, run: Runner) -> None:
        limits = Limits(timeout_seconds=2)
        result = run("import time\ntime.sleep(301)\ndef main():\n    pass\n", limits_=limits)
        assert result.error is not None
        assert result.error.kind == "timeout"

    def test_missing_code_dir_is_an_infrastructure_error(
        self, sandbox_backend: SandboxBackend, tmp_path: Path
    ) -> None:
        result = sandbox_backend.run(RunRequest(tmp_path / "absent", "job:main", {}))
        assert result.error is not None
        assert result.error.kind == "infrastructure_error"

    def test_memory_error_kind(self, run: Runner) -> None:
        result = run("def main():\n    raise MemoryError()\n")
        assert result.error is not None
        assert result.error.kind == "out_of_memory"


class TestFailClosed:
    def test_every_limit_has_a_mechanism_or_is_documented(
        self, sandbox_backend: SandboxBackend
    ) -> None:
        enforcement = sandbox_backend.enforcement()
        assert set(enforcement) == set(LIMIT_NAMES)
        for name, how in enforcement.items():
            assert (how == NOT_ENFORCED) == (name in sandbox_backend.unenforceable), name

    def test_bwrap_without_the_features_refuses(self, tmp_path: Path) -> None:
        """A bubblewrap too old for --size and --disable-userns must not run jobs."""
        old = tmp_path / "bwrap"
        old.write_text("#!/bin/sh\necho 'usage: bwrap [OPTIONS...] COMMAND'\n")
        old.chmod(old.stat().st_mode | stat.S_IXUSR)
        sandbox_backend = BwrapBackend(bwrap=str(old))
        with pytest.raises(SandboxUnavailable, match="tmp_size"):
            sandbox_backend.enforcement()
        result = sandbox_backend.run(RunRequest(tmp_path, "job:main", {}))
        assert result.error is not None
        assert result.error.kind == "sandbox_error"

    def test_bwrap_as_root_without_cgroups_refuses(self) -> None:
        """As root the kernel ignores RLIMIT_NPROC: without a pids cgroup nothing bounds forks."""
        import os

        if os.geteuid() != 0:
            pytest.skip("checks the refusal of a root worker")
        try:
            sandbox_backend = BwrapBackend(use_cgroups=False)
        except SandboxUnavailable as exc:
            pytest.skip(str(exc))
        with pytest.raises(SandboxUnavailable, match="pids"):
            sandbox_backend.enforcement()

    def test_process_backend_documents_what_it_cannot_enforce(self) -> None:
        skip_unless_process_backend()
        import os

        sandbox_backend = ProcessBackend()
        assert "user_namespaces" in sandbox_backend.unenforceable
        # Network and mount namespaces need root (hole 1 of issue 12; read-only mounts, issue
        # 27): enforced there, documented otherwise.
        if os.geteuid() == 0:
            assert not {"network", "tmp_size", "read_only_fs"} & sandbox_backend.unenforceable
            assert "namespace" in sandbox_backend.enforcement()["network"]
        else:
            assert sandbox_backend.enforcement()["network"] == NOT_ENFORCED
            assert "read_only_fs" in sandbox_backend.unenforceable

    def test_factory_and_settings(self) -> None:
        skip_unless_process_backend()
        settings = sandbox_settings().model_copy(
            update={"sandbox": "process", "sandbox_timeout_seconds": 7.5, "sandbox_pids": 99}
        )
        assert create_backend(settings).name == "process"
        assert limits_from(settings) == Limits(timeout_seconds=7.5, pids=99)
        defaults = Limits()
        assert (defaults.timeout_seconds, defaults.memory_bytes, defaults.tmp_bytes) == (
            300.0,
            2 << 30,
            512 << 20,
        )
        assert (defaults.cpus, defaults.output_bytes) == (2.0, 64 << 10)
