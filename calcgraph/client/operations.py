"""What each client method sends and how its answer is read, free of I/O.

A simple method is a `Call`: method, path, query, body and the parser of its JSON answer. A
method that talks more than once (waiting for a job, driving a run) is a `Flow`: a generator
that yields `Call`s and `Sleep`s and receives each call's parsed answer. `Client` and
`AsyncClient` each hold one driver for both, so every method body is written once, here or in
a sibling by feature (`operations_runs`, `operations_events`), and declared once as a method of
both, in `calcgraph.client.base`.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import quote

from calcgraph.client import models as m
from calcgraph.client.errors import NotFound
from calcgraph.client.model_base import Model

R = TypeVar("R")
M = TypeVar("M", bound=Model)

MANIFEST = "calcgraph.yaml"
DEFAULT_PERIOD = 2.0
"""The specification's polling period (Limits: tick polling period, 2 seconds)."""
MAX_TICK_WAIT = 30.0
Params = Sequence[tuple[str, str]]


@dataclass(frozen=True)
class Call(Generic[R]):
    method: str
    path: str
    parse: Callable[[Any], R]
    params: Params = ()
    json: Any = None
    # Seconds the server may hold the request on purpose (`?wait=`), added to the timeout.
    holds: float = 0.0


@dataclass(frozen=True)
class Sleep:
    seconds: float


Step = Call[Any] | Sleep
Flow = Generator[Step, Any, R]
Pages = Generator[Call[Any], Any, None]
"""An endless listing: the calls of its pages, one after another, each sent the page its call
answered (whose `items` the client hands out in turn)."""


def _segment(text: str) -> str:
    """One path segment. An empty id or name is refused here, as the server refuses an unknown
    one: sent, it would name the collection (`GET /workflow-runs/` is the list of runs)."""
    if not text:
        raise NotFound("NotFound: the id or name is empty")
    return quote(text, safe="@")


def _model(cls: type[M]) -> Callable[[Any], M]:
    return cls.model_validate


def _page(cls: type[M]) -> Callable[[Any], m.Page[M]]:
    return m.Page[cls].model_validate  # type: ignore[valid-type]


def _get(cls: type[M], template: str, *ids: str) -> Call[M]:
    """GET the resource `template` names once its `{}` are the ids, each one path segment."""
    return Call("GET", template.format(*map(_segment, ids)), _model(cls))


class SearchedListing(Protocol[M]):
    def __call__(
        self, limit: int | None = None, cursor: str | None = None, search: str | None = None
    ) -> Call[m.Page[M]]: ...


def _searched(name: str, path: str, cls: type[M], searched: str) -> SearchedListing[M]:
    """The listing operation `name` of a catalogue at `path`, a page at a time, narrowed by a
    case-insensitive part of what `searched` says."""

    def listing(
        limit: int | None = None, cursor: str | None = None, search: str | None = None
    ) -> Call[m.Page[M]]:
        return _listing(path, cls, limit, cursor, _filters(search=search))

    listing.__name__ = listing.__qualname__ = name
    listing.__doc__ = f"`search`: a case-insensitive part of {searched}."
    return listing


def _listing(
    path: str,
    cls: type[M],
    limit: int | None,
    cursor: str | None,
    extra: Params = (),
) -> Call[m.Page[M]]:
    params = [*extra]
    if limit is not None:
        params.append(("limit", str(limit)))
    if cursor:
        params.append(("cursor", cursor))
    return Call("GET", path, _page(cls), params=params)


DateLike = datetime.datetime | datetime.date | str
"""A listing's date filter: a datetime (naive: UTC), a date (its midnight UTC) or ISO text."""


def _filters(**fields: DateLike | Sequence[str] | None) -> list[tuple[str, str]]:
    """The given filters as query parameters, in order: a date or a datetime in ISO 8601, a
    sequence one parameter per item (a lone string is one value, not its letters), None left
    out (an empty search is sent too: the server says)."""
    params: list[tuple[str, str]] = []
    for name, value in fields.items():
        if value is None:
            continue
        if isinstance(value, str):
            params.append((name, value))
        elif isinstance(value, datetime.date):  # a datetime is a date too
            params.append((name, value.isoformat()))
        else:
            params.extend((name, item) for item in value)
    return params


def _without_none(**fields: Any) -> dict[str, Any]:
    return {key: value for key, value in fields.items() if value is not None}


# Service ---------------------------------------------------------------------------------


def health() -> Call[m.Health]:
    return Call("GET", "/health", _model(m.Health))


def check_connection(
    source: str | dict[str, Any], target: str | dict[str, Any]
) -> Call[m.Compatibility]:
    return Call(
        "POST",
        "/types/check-connection",
        _model(m.Compatibility),
        json={"source": source, "target": target},
    )


def list_types() -> Call[list[dict[str, Any]]]:
    def parse(body: Any) -> list[dict[str, Any]]:
        items = body.get("items", body) if isinstance(body, dict) else body
        return list(items)

    return Call("GET", "/types", parse)


def graphql(query: str, variables: Mapping[str, Any] | None = None) -> Call[dict[str, Any]]:
    """The raw GraphQL answer (`data` and `errors`), for what REST does not show."""
    return Call("POST", "/graphql", dict, json={"query": query, "variables": dict(variables or {})})


# Identity --------------------------------------------------------------------------------


def me() -> Call[m.User]:
    return Call("GET", "/auth/me", _model(m.User))


def login_start() -> Call[m.LoginStart]:
    return Call("POST", "/auth/login", _model(m.LoginStart))


def login_complete(code: str, code_verifier: str) -> Call[m.LoginResult]:
    body = {"code": code, "code_verifier": code_verifier}
    return Call("POST", "/auth/callback", _model(m.LoginResult), json=body)


# Organizations ---------------------------------------------------------------------------


def create_organization(slug: str, name: str) -> Call[m.Organization]:
    body = {"slug": slug, "name": name}
    return Call("POST", "/organizations", _model(m.Organization), json=body)


def get_organization(slug: str) -> Call[m.Organization]:
    return _get(m.Organization, "/organizations/{}", slug)


def usage() -> Call[m.UsageReport]:
    """What every user holds now beside the per-user limits; admins only (PermissionDenied)."""
    return Call("GET", "/admin/usage", _model(m.UsageReport))


def add_member(slug: str, username: str, role: str = "member") -> Call[m.Member]:
    body = {"username": username, "role": role}
    return Call("POST", f"/organizations/{_segment(slug)}/members", _model(m.Member), json=body)


def remove_member(slug: str, username: str) -> Call[None]:
    path = f"/organizations/{_segment(slug)}/members/{_segment(username)}"
    return Call("DELETE", path, lambda _: None)


# Packages and functions ------------------------------------------------------------------


def publish_package(
    manifest: Mapping[str, Any] | str,
    files: Mapping[str, str],
    visibility: str | None = None,
    organization: str | None = None,
) -> Call[m.DeploymentReport]:
    body = {"manifest": manifest, "files": dict(files), "visibility": visibility}
    body |= _without_none(organization=organization)
    return Call("POST", "/packages", _model(m.DeploymentReport), json=body)


def read_package_directory(path: str | os.PathLike[str]) -> tuple[str, dict[str, str]]:
    """`calcgraph.yaml` and every text file of a package directory, by POSIX path, as
    `POST /packages` takes them (like a git deploy: dot-directories and caches left out)."""
    root = Path(path)
    manifest_path = root / MANIFEST
    if not manifest_path.is_file():
        raise FileNotFoundError(f"{root} has no {MANIFEST}")
    files: dict[str, str] = {}
    for directory, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(names):
            file = Path(directory, name)
            if name.startswith(".") or file.suffix in {".pyc", ".pyo"} or file.is_symlink():
                continue
            try:
                files[file.relative_to(root).as_posix()] = file.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                raise ValueError(f"{file} is not UTF-8 text; packages carry source files") from None
    return files[MANIFEST], files


def publish_directory(
    path: str | os.PathLike[str], visibility: str | None = None, organization: str | None = None
) -> Call[m.DeploymentReport]:
    """`publish_package` of a package directory, read now (`read_package_directory`)."""
    manifest, files = read_package_directory(path)
    return publish_package(manifest, files, visibility, organization)


def deploy_git(
    git_url: str, ref: str, visibility: str | None = None, organization: str | None = None
) -> Call[m.DeploymentReport]:
    body = {"git_url": git_url, "ref": ref, "visibility": visibility}
    body |= _without_none(organization=organization)
    return Call("POST", "/packages/from-git", _model(m.DeploymentReport), json=body)


list_packages = _searched("list_packages", "/packages", m.Package, "the name")


def get_package(package_id: str) -> Call[m.Package]:
    return _get(m.Package, "/packages/{}", package_id)


def diff_package(package: str, from_version: str, to_version: str) -> Call[m.PackageDiff]:
    """The interface changes of `package` (name or id) from one version to another."""
    return Call(
        "GET",
        f"/packages/{_segment(package)}/diff",
        _model(m.PackageDiff),
        params=[("from_version", from_version), ("to_version", to_version)],
    )


list_functions = _searched("list_functions", "/functions", m.Function, "`package/name`")


def get_function(function_id: str) -> Call[m.FunctionDetail]:
    return _get(m.FunctionDetail, "/functions/{}", function_id)


def execute_path(name_or_id: str, version: str | None = None) -> str:
    """`package/function[@version]` or a function (version) id, as the execute routes take it."""
    package, slash, function = name_or_id.partition("/")
    if not slash:
        if version is not None:
            raise ValueError("a version goes with package/function, not with an id")
        return f"/functions/{_segment(name_or_id)}/execute"
    if "@" in function:
        function, _, named = function.partition("@")
        if version is not None and version != named:
            raise ValueError(f"two versions given: {named} and {version}")
        version = named
    suffix = f"@{version}" if version else ""
    return f"/packages/{_segment(package)}/functions/{_segment(function)}{suffix}/execute"


def execute(
    name_or_id: str,
    inputs: Mapping[str, Any] | None = None,
    version: str | None = None,
    wait: float | None = None,
    refresh: bool = False,
) -> Call[m.ExecuteResult]:
    """Run a function (`package/function[@version]` or an id); `wait` seconds for it.
    `refresh`: never answered from the result cache (the new result is stored)."""
    params = [] if wait is None else [("wait", str(wait))]
    if refresh:
        params.append(("cache", "refresh"))
    return Call(
        "POST",
        execute_path(name_or_id, version),
        _model(m.ExecuteResult),
        params=params,
        json={"inputs": dict(inputs or {})},
        holds=30.0 if wait is None else wait,
    )


# Jobs ------------------------------------------------------------------------------------


def list_jobs(
    limit: int | None = None,
    cursor: str | None = None,
    function: str | None = None,
    status: Sequence[str] = (),
    created_after: DateLike | None = None,
    created_before: DateLike | None = None,
) -> Call[m.Page[m.Job]]:
    """`function`: a case-insensitive part of `package/function`; `status`: any of them;
    `created_after` inclusive, `created_before` exclusive (a datetime, a date or ISO text)."""
    where = _filters(
        status=status, function=function, created_after=created_after, created_before=created_before
    )
    return _listing("/jobs", m.Job, limit, cursor, where)


def get_job(job_id: str) -> Call[m.Job]:
    return _get(m.Job, "/jobs/{}", job_id)


def cancel_job(job_id: str) -> Call[m.Job]:
    """Cancel a queued or running job of yours: it ends failed, kind `cancelled`."""
    return Call("POST", f"/jobs/{_segment(job_id)}/cancel", _model(m.Job))


def wait_for_job(
    job_id: str, period: float = DEFAULT_PERIOD, timeout: float | None = None
) -> Flow[m.Job]:
    """Poll the job every `period` seconds until it ends; TimeoutError after `timeout`."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        job: m.Job = yield get_job(job_id)
        if job.done:
            return job
        if deadline is not None and time.monotonic() + period > deadline:
            raise TimeoutError(f"job {job_id} is still {job.status} after {timeout} s")
        yield Sleep(period)
