"""The `docker` builder: an image per function build, from the locally built base image.

The requirements are installed on this host (`pip --target`, binary wheels only) and copied in:
the Dockerfile has only `FROM`, `COPY` and `LABEL`, so the build runs no code, needs no network
(`network_mode=none`) and gets no build arguments or secrets. The installed requirements land in
`/opt/calcgraph/deps`, put on `sys.path` by a `.pth` file in Debian's version-independent
`/usr/lib/python3/dist-packages` (the sandbox runs `python3 -I`, which ignores PYTHONPATH); the
code is copied to `/opt/calcgraph/code` (the docker sandbox mounts the version's code at
`/code` all the same).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from calcgraph.builds.artifact import DEPS_DIR, BuildInputs, BuiltArtifact, tree_digest
from calcgraph.builds.pip import BuildFailed
from calcgraph.ops import docker_clients as clients

DOCKER_PREFIX = "docker:"
KIND_LABEL = "calcgraph.kind"
FUNCTION_LABEL = "calcgraph.function"
_DOCKERFILE = """\
FROM {base}
COPY deps/ /opt/calcgraph/deps/
COPY calcgraph-deps.pth /usr/lib/python3/dist-packages/calcgraph-deps.pth
COPY code/ /opt/calcgraph/code/
LABEL {kind_label}="function" {function_label}="{function}"
"""


def docker_client(base_url: str, timeout: float = 60.0) -> Any:
    try:
        return clients.docker_client(base_url, timeout)
    except clients.EngineUnreachable as exc:
        raise BuildFailed(str(exc)) from None


def image_name(repository: str, function: str, digest: str) -> str:
    # Docker repositories are lowercase [a-z0-9._-] path components.
    component = re.sub(r"[^a-z0-9._-]+", "-", function.lower()).strip("._-") or "function"
    return f"{repository.rstrip('/')}/{component}:{digest[:20]}"


def build_image(
    client: Any,
    base_image: str,
    repository: str,
    function: str,
    inputs: BuildInputs,
) -> BuiltArtifact:
    deadline, log = inputs.deadline, inputs.log
    context = Path(tempfile.mkdtemp(prefix="calcgraph-image-"))
    try:
        inputs.stage(context)
        (context / "calcgraph-deps.pth").write_text("/opt/calcgraph/deps\n", encoding="utf-8")
        (context / "Dockerfile").write_text(
            _DOCKERFILE.format(
                base=base_image,
                kind_label=KIND_LABEL,
                function_label=FUNCTION_LABEL,
                function=function,
            ),
            encoding="utf-8",
        )
        digest, _ = tree_digest(context)
        from docker.errors import DockerException

        tag = image_name(repository, function, digest)
        log.write(f"docker build -t {tag} (FROM {base_image}, network none)")
        client.api.timeout = max(1, int(deadline.remaining()))
        try:
            for chunk in client.api.build(
                path=str(context), tag=tag, network_mode="none", rm=True, forcerm=True,
                pull=False, decode=True,
            ):  # fmt: skip
                if str(chunk.get("stream", "")).strip():
                    log.write(str(chunk["stream"]))
                if "error" in chunk:
                    raise BuildFailed(f"docker build failed: {chunk['error']}".strip())
                deadline.remaining()
            size = int(client.images.get(tag).attrs["Size"])
        except DockerException as exc:
            raise BuildFailed(f"docker build failed: {exc}") from exc
        log.write(f"image {tag}: {size} bytes")
        # The scanner reads the installed distributions from the context's copy, which is
        # exactly what the image holds; it is moved out of the context before it is removed.
        kept = Path(tempfile.mkdtemp(prefix="calcgraph-deps-"))
        shutil.move(str(context / DEPS_DIR), kept / DEPS_DIR)
        return BuiltArtifact(DOCKER_PREFIX + tag, size, kept / DEPS_DIR)
    finally:
        shutil.rmtree(context, ignore_errors=True)


def remove_image(client: Any, image: str) -> bool:
    from docker.errors import ImageNotFound

    try:
        client.images.remove(image, noprune=False)
    except ImageNotFound:
        return False
    return True
