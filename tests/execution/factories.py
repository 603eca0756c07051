"""Rows for execution tests, inserted directly: a package with code blobs, one deployment,
its functions and their versions (the publish service is another feature's)."""

from __future__ import annotations

import hashlib
import textwrap
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select

from calcgraph.db.engine import Database
from calcgraph.domain.access.principal import Principal
from calcgraph.domain.functions.models import Function, FunctionVersion
from calcgraph.domain.packages.models import (
    CodeBlob,
    Package,
    PackageVersion,
    PackageVersionFunction,
)

FLOAT_IO = {"x": {"type": "Float", "required": True}}

MAIN = textwrap.dedent(
    """
    import time

    def add(x, y):
        return {"sum": x + y}

    def double(length):
        return {"doubled": 2 * length}

    def echo(**inputs):
        return {"echo": inputs}

    def boom(x):
        print("about to fail with", x)
        raise ValueError(f"bad x: {x}")

    def slow(x):
        time.sleep(x)
        return {"y": x}
    """
)

FUNCTIONS: dict[str, dict[str, Any]] = {
    "add": {
        "handler": "main:add",
        "inputs": {"x": {"type": "Float", "required": True}, "y": {"type": "Float"}},
        "outputs": {"sum": {"type": "Float"}},
    },
    "double": {
        "handler": "main:double",
        "inputs": {"length": {"type": "Length", "required": True}},
        "outputs": {"doubled": {"type": "Length"}},
    },
    "echo": {"handler": "main:echo"},  # untyped
    "boom": {"handler": "main:boom", "inputs": FLOAT_IO, "outputs": {"y": {"type": "Float"}}},
    "slow": {"handler": "main:slow", "inputs": FLOAT_IO, "outputs": {"y": {"type": "Float"}}},
}


@dataclass(frozen=True)
class Deployed:
    package_id: str
    package_name: str
    package_version_id: str
    functions: dict[str, str]
    """Function name -> function id."""
    versions: dict[str, str]
    """Function name -> function version id."""


async def _blobs(session: Any, files: dict[str, str]) -> dict[str, str]:
    digests: dict[str, str] = {}
    for path, text in files.items():
        content = text.encode()
        sha = hashlib.sha256(content).hexdigest()
        digests[path] = sha
        if await session.get(CodeBlob, sha) is None:
            session.add(CodeBlob(sha256=sha, content=content, size=len(content)))
            await session.flush()
    return digests


async def deploy(
    database: Database,
    owner: Principal,
    *,
    files: dict[str, str] | None = None,
    functions: dict[str, dict[str, Any]] | None = None,
    version: str = "1.0.0",
    visibility: str = "private",
    package: Deployed | None = None,
    name: str | None = None,
) -> Deployed:
    """Deploy `functions` (default: FUNCTIONS over MAIN) as a new package, or as a new
    version of `package` (each function gets a new function version `version`)."""
    files = files if files is not None else {"main.py": MAIN}
    functions = functions if functions is not None else FUNCTIONS
    async with database.write_session() as session:
        if package is None:
            row = Package(
                name=name or f"exec-{uuid.uuid4().hex[:10]}",
                owner_id=owner.user_id,
                visibility=visibility,
            )
            session.add(row)
            await session.flush()
            package_id, package_name = row.id, row.name
        else:
            package_id, package_name = package.package_id, package.package_name
        digests = await _blobs(session, files)
        previous = await session.scalars(
            select(PackageVersion).where(PackageVersion.package_id == package_id)
        )
        for old_version in previous:
            old_version.is_latest = False
        deployment = PackageVersion(
            package_id=package_id,
            version=version,
            is_latest=True,
            manifest={"package": {"name": package_name, "version": version}},
            files=digests,
        )
        session.add(deployment)
        await session.flush()
        ids: dict[str, str] = {}
        version_ids: dict[str, str] = {}
        for fname, spec in functions.items():
            function = None
            if package is not None and fname in package.functions:
                function = await session.get(Function, package.functions[fname])
            if function is None:
                function = Function(name=fname, package_id=package_id)
                session.add(function)
                await session.flush()
            typed = "inputs" in spec and "outputs" in spec
            fv = FunctionVersion(
                function_id=function.id,
                package_version_id=deployment.id,
                version=version,
                handler=spec["handler"],
                code_checksum=hashlib.sha256(repr(sorted(digests.items())).encode()).hexdigest(),
                inputs_schema=spec.get("inputs") if typed else None,
                outputs_schema=spec.get("outputs") if typed else None,
                typed=typed,
            )
            session.add(fv)
            await session.flush()
            session.add(
                PackageVersionFunction(
                    package_version_id=deployment.id, function_version_id=fv.id, status="new"
                )
            )
            function.current_version = version
            function.current_version_id = fv.id
            ids[fname], version_ids[fname] = function.id, fv.id
        await session.flush()
        return Deployed(package_id, package_name, deployment.id, ids, version_ids)
