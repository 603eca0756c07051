"""Pushing built images to the configured registry (kept in the local engine otherwise)."""

from __future__ import annotations

from typing import Any

from calcgraph.builds.logs import BuildLog
from calcgraph.builds.pip import BuildFailed, Deadline


def push_image(
    client: Any, image: str, registry: str | None, deadline: Deadline, log: BuildLog
) -> str:
    """The reference workers pull: `image` itself when no registry is set, else its copy there."""
    from docker.errors import DockerException  # imported on use: the SDK is slow to import

    from calcgraph.workers.sandbox.docker import with_registry

    if registry is None:
        log.write(f"no registry configured: {image} kept in the local engine")
        return image
    target = with_registry(image, registry)
    repository, _, tag = target.rpartition(":")
    try:
        client.images.get(image).tag(repository, tag)
        client.api.timeout = max(1, int(deadline.remaining()))
        for chunk in client.images.push(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                raise BuildFailed(f"pushing {target} failed: {chunk['error']}")
            if "status" in chunk and "progress" not in chunk:
                log.write(f"push: {chunk['status']}")
    except DockerException as exc:
        raise BuildFailed(f"pushing {target} failed: {exc}") from exc
    log.write(f"pushed {target}")
    return target
