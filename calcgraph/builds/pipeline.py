"""One build from validated code to a stored, scanned image or artifact (blocking: run it in a
thread). Steps of the specification: build, scan, push; the service validates before and
records after."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from typing import Literal

from calcgraph.builds.artifact import BuildInputs, BuiltArtifact, build_artifact, delete_artifact
from calcgraph.builds.distributions import installed_distributions
from calcgraph.builds.docker_builder import DOCKER_PREFIX, build_image, docker_client, remove_image
from calcgraph.builds.logs import BuildLog
from calcgraph.builds.pip import BuildFailed, Deadline, PipOptions
from calcgraph.builds.registry import push_image
from calcgraph.builds.report import ScanError, ScanReport
from calcgraph.builds.scanner import scanner_from_settings
from calcgraph.domain.builds.ports import BuildRequest
from calcgraph.settings import Settings

BuilderKind = Literal["docker", "artifact"]


def builder_for(settings: Settings) -> BuilderKind:
    return "docker" if settings.sandbox_kind == "docker" else "artifact"


@dataclass(frozen=True)
class BuildResult:
    status: Literal["success", "refused", "failed"]
    duration_seconds: float
    artifact: BuiltArtifact | None = None
    report: ScanReport | None = None
    reason: str | None = None


def pip_options(settings: Settings) -> PipOptions:
    return PipOptions(
        index_url=settings.build_index_url,
        find_links=tuple(settings.build_find_links),
        no_index=settings.build_no_index,
    )


def run_build(settings: Settings, request: BuildRequest, log: BuildLog) -> BuildResult:
    started = time.monotonic()
    deadline = Deadline(settings.build_timeout_seconds)
    kind = builder_for(settings)
    log.write(f"build of {request.function!r} with the {kind} builder")
    client = None
    artifact: BuiltArtifact | None = None
    inputs = BuildInputs(request.files, request.requirements, pip_options(settings), deadline, log)
    try:
        if kind == "docker":
            client = docker_client(settings.docker_host, timeout=deadline.remaining())
            artifact = build_image(
                client,
                settings.sandbox_base_image,
                settings.function_image_repository,
                request.function,
                inputs,
            )
        else:
            artifact = build_artifact(settings.build_dir, inputs)
        report = _scan(settings, artifact, log)
        if report.refused:
            verdict = report.verdict
            reason = f"refused at scan: {verdict.critical} CRITICAL vulnerabilities: " + "; ".join(
                f.warning for f in verdict.findings if f.severity == "CRITICAL"
            )
            log.write(reason)
            _discard(settings, client, artifact, log)
            return BuildResult("refused", time.monotonic() - started, None, report, reason)
        if client is not None:
            push_image(
                client,
                artifact.reference.removeprefix(DOCKER_PREFIX),
                settings.sandbox_registry,
                deadline,
                log,
            )
        log.write("build succeeded")
        return BuildResult("success", time.monotonic() - started, artifact, report)
    except (BuildFailed, ScanError) as exc:
        log.write(f"build failed: {exc}")
        if artifact is not None and client is not None:
            _discard(settings, client, artifact, log)
        return BuildResult("failed", time.monotonic() - started, reason=str(exc))
    finally:
        if client is not None:
            if artifact is not None:
                # The docker builder's copy of the requirements, kept only for the scan.
                shutil.rmtree(artifact.deps_dir.parent, ignore_errors=True)
            client.close()


def _scan(settings: Settings, artifact: BuiltArtifact, log: BuildLog) -> ScanReport:
    distributions = installed_distributions(artifact.deps_dir)
    log.write(
        "installed: " + (", ".join(f"{d.name} {d.version}" for d in distributions) or "nothing")
    )
    report = scanner_from_settings(settings).scan(artifact.deps_dir, distributions)
    log.write(f"scanned by {report.scanner}")
    for note in report.notes:
        log.write(f"note: {note}")
    for warning in report.verdict.warnings:
        log.write(f"warning: {warning}")
    return report


def _discard(settings: Settings, client: object, artifact: BuiltArtifact, log: BuildLog) -> None:
    """A refused or failed build leaves nothing runnable behind, unless the same content was
    already stored by an earlier build that other versions may run from."""
    if artifact.reused:
        log.write(f"{artifact.reference} was stored before this build: kept")
        return
    if artifact.reference.startswith(DOCKER_PREFIX):
        remove_image(client, artifact.reference.removeprefix(DOCKER_PREFIX))
    else:
        delete_artifact(settings.build_dir, artifact.reference)
    log.write(f"discarded {artifact.reference}")
