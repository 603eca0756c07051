"""Build benchmarks (issue 6): the time of one build, per builder, of a function with no
dependencies and with three small wheels (made on the spot, installed with `--no-index`).

- `build_artifact`: the embedded builder (bwrap/process sandboxes): pip `--target` into a
  content-addressed artifact directory, plus the OSV scan.
- `build_docker`: the docker builder: the same install, then an image `FROM` the local base
  image; skipped with a note when no engine answers.

Each build has fresh code, so neither the artifact store nor the engine's layer cache answers
from an earlier iteration; p50/p99 are per build.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from bench.core import Options, Result, summarise
from calcgraph.builds.docker_builder import DOCKER_PREFIX, docker_client, remove_image
from calcgraph.builds.logs import BuildLog
from calcgraph.builds.pip import BuildFailed
from calcgraph.builds.pipeline import run_build
from calcgraph.domain.builds.ports import BuildRequest
from calcgraph.settings import Settings
from tests.builds.build_fixtures import CLEAN, build_settings

ITERATIONS = {"artifact": 8, "docker": 4}
SCENARIOS = {"no_dependencies": (), "three_wheels": tuple(f"{n}=={v}" for n, v in CLEAN)}


def _run(builder: str) -> list[Result]:
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="calcgraph-bench-builds-") as root:
        settings = build_settings(
            Settings(_env_file=None),
            Path(root),
            sandbox="docker" if builder == "docker" else "process",
            function_image_repository="calcgraph-bench/fn",
        )
        for scenario, requirements in SCENARIOS.items():
            latencies: list[int] = []
            errors = 0
            started = time.perf_counter()
            for i in range(ITERATIONS[builder]):
                code = f"def main(x):\n    return x + {i}  # {scenario}\n"
                files = {"main.py": code, "requirements.txt": "\n".join(requirements)}
                t0 = time.perf_counter_ns()
                result = run_build(settings, BuildRequest("bench", files, requirements), BuildLog())
                latencies.append(time.perf_counter_ns() - t0)
                if result.status != "success":
                    errors += 1
                elif result.artifact and result.artifact.reference.startswith(DOCKER_PREFIX):
                    _remove(settings, result.artifact.reference)
            results.append(
                summarise(
                    f"build_{builder}",
                    scenario,
                    f"run_build, {len(requirements)} local wheels, OSV scan",
                    latencies,
                    time.perf_counter() - started,
                    errors,
                )
            )
    return results


def _remove(settings: Settings, reference: str) -> None:
    client = docker_client(settings.docker_host)
    try:
        remove_image(client, reference.removeprefix(DOCKER_PREFIX))
    finally:
        client.close()


def artifact(options: Options) -> list[Result]:
    return _run("artifact")


def docker(options: Options) -> list[Result]:
    try:
        docker_client(Settings(_env_file=None).docker_host, timeout=5).close()
    except BuildFailed as exc:
        return [
            Result("build_docker", "skipped", f"no Docker engine: {exc}", 0, 0.0, 0.0, 0.0, 0.0)
        ]
    return _run("docker")


BENCHMARKS = {"build_artifact": artifact, "build_docker": docker}
