"""The build use case's `Builds` port on this machine: the pipeline (pip or docker, the
scanner, the registry) in a worker thread, logs as files under the build directory."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from calcgraph.builds.logs import BuildLog, read_log, store_log
from calcgraph.builds.pipeline import run_build
from calcgraph.domain.builds.ports import BuildReport, BuildRequest
from calcgraph.settings import Settings


@dataclass(frozen=True)
class LocalBuilds:
    settings: Settings

    async def build(self, request: BuildRequest) -> BuildReport:
        log = BuildLog()
        result = await asyncio.to_thread(run_build, self.settings, request, log)
        artifact = result.artifact
        return BuildReport(
            status=result.status,
            duration_seconds=result.duration_seconds,
            log=log.text(),
            reference=artifact.reference if artifact is not None else None,
            size_bytes=artifact.size_bytes if artifact is not None else None,
            vulnerabilities=result.report.verdict.as_dict() if result.report is not None else {},
            reason=result.reason,
        )

    async def store_log(self, build_id: str, text: str) -> str:
        return await asyncio.to_thread(store_log, self.settings.build_dir, build_id, text)

    async def read_log(self, key: str) -> str | None:
        return await asyncio.to_thread(read_log, self.settings.build_dir, key)
