from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    UniqueConstraint,
    func,
    literal_column,
)
from sqlalchemy.orm import Mapped, mapped_column

from calcgraph.db.base import Base, IdMixin, JSONType, TimestampMixin, utcnow


class Package(IdMixin, TimestampMixin, Base):
    __tablename__ = "packages"
    __table_args__ = (
        Index("ix_packages_visibility_org", "visibility", "organization_id"),
        # Names are unique without regard to case (contract 8b), held by the database too: two
        # concurrent first deployments of `PUB-x` and `pub-x` cannot both create a package.
        Index("uq_packages_name_nocase", func.lower(literal_column("name")), unique=True),
    )

    name: Mapped[str] = mapped_column(String(200), unique=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("users.id"), index=True)
    organization_id: Mapped[str | None] = mapped_column(ForeignKey("organizations.id"), index=True)
    visibility: Mapped[str] = mapped_column(String(20))
    """`private` (owner), `internal` (owning organization), `public` (authenticated users)."""
    description: Mapped[str | None] = mapped_column(String(2000))
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class PackageVersion(IdMixin, TimestampMixin, Base):
    __tablename__ = "package_versions"
    __table_args__ = (UniqueConstraint("package_id", "version"),)

    package_id: Mapped[str] = mapped_column(ForeignKey("packages.id", ondelete="CASCADE"))
    version: Mapped[str] = mapped_column(String(100))
    git_ref: Mapped[str | None] = mapped_column(String(255))
    git_commit: Mapped[str | None] = mapped_column(String(40))
    is_latest: Mapped[bool] = mapped_column(Boolean, default=False)
    is_stable: Mapped[bool] = mapped_column(Boolean, default=True)
    manifest: Mapped[dict[str, Any]] = mapped_column(JSONType)
    files: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    """Path of each file of the deployment to the SHA-256 of its content in `code_blobs`."""
    changelog: Mapped[dict[str, Any] | None] = mapped_column(JSONType)


class PackageVersionFunction(Base):
    """Which function version each deployment carries, and what the deployment did to it."""

    __tablename__ = "package_version_functions"

    package_version_id: Mapped[str] = mapped_column(
        ForeignKey("package_versions.id", ondelete="CASCADE"), primary_key=True
    )
    function_version_id: Mapped[str] = mapped_column(
        ForeignKey("function_versions.id"), primary_key=True, index=True
    )
    status: Mapped[str] = mapped_column(String(20))
    """`new`, `updated` or `unchanged`."""
    deployed_at: Mapped[datetime] = mapped_column(default=utcnow)


class PackageVersionDependency(Base):
    """A package version's pinned dependency (contract 11, Dependencies): every member of its
    closure, the direct ones (with the declared range) and those they brought along as they
    were pinned. Written once at deployment and never changed: a later release of the
    dependency changes nothing until the package is deployed again."""

    __tablename__ = "package_version_dependencies"

    package_version_id: Mapped[str] = mapped_column(
        ForeignKey("package_versions.id", ondelete="CASCADE"), primary_key=True
    )
    dependency_version_id: Mapped[str] = mapped_column(
        ForeignKey("package_versions.id"), primary_key=True, index=True
    )
    direct: Mapped[bool] = mapped_column(Boolean, default=True)
    """Declared in this version's manifest; False: brought along by a dependency's pins."""
    range: Mapped[str | None] = mapped_column(String(200))
    """The declared range of a direct dependency."""


class CodeBlob(Base):
    """Content-addressed source files, shared by every deployment that carries them."""

    __tablename__ = "code_blobs"

    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    content: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(Integer)


class PackageDeploymentEvent(IdMixin, TimestampMixin, Base):
    """What happened to a package's current version (contract 11): `deployed` (hosted),
    `promoted` (made current, by a rolling deployment or a promote), `rolled_back` (the
    previous current made current again). `GET /packages/{id}/deployment` shows them."""

    __tablename__ = "package_deployment_events"
    __table_args__ = (Index("ix_package_deployment_events_package", "package_id", "created_at"),)

    package_id: Mapped[str] = mapped_column(ForeignKey("packages.id", ondelete="CASCADE"))
    version: Mapped[str] = mapped_column(String(100))
    action: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(String(500))


class PackageCanary(IdMixin, TimestampMixin, Base):
    """A canary deployment (contract 11): while `running`, unpinned calls are shared between
    the versions of `traffic_split`; the workers' timer judges the candidate at `ends_at` (or
    earlier, on its error rate) and sets `status` once, by a conditional UPDATE."""

    __tablename__ = "package_canaries"
    __table_args__ = (Index("ix_package_canaries_package_status", "package_id", "status"),)

    package_id: Mapped[str] = mapped_column(ForeignKey("packages.id", ondelete="CASCADE"))
    candidate: Mapped[str] = mapped_column(String(100))
    current: Mapped[str | None] = mapped_column(String(100))
    """The version current when the canary started, which stays current unless promoted."""
    traffic_split: Mapped[dict[str, Any]] = mapped_column(JSONType)
    """Version to percentage, as the manifest gave it."""
    error_rate_max: Mapped[float | None] = mapped_column(Float)
    latency_p95_max_ms: Mapped[float | None] = mapped_column(Float)
    started_at: Mapped[datetime]
    ends_at: Mapped[datetime]
    status: Mapped[str] = mapped_column(String(20), default="running")
    """`running`, `promoted` or `rolled_back`."""
    decided_at: Mapped[datetime | None]
    reason: Mapped[str | None] = mapped_column(String(500))


class CanaryJob(Base):
    """Which version of a running canary one unpinned call was routed to: the candidate's
    jobs are what the canary is judged on."""

    __tablename__ = "canary_jobs"
    __table_args__ = (Index("ix_canary_jobs_canary_version", "canary_id", "version"),)

    job_id: Mapped[str] = mapped_column(ForeignKey("jobs.id", ondelete="CASCADE"), primary_key=True)
    canary_id: Mapped[str] = mapped_column(ForeignKey("package_canaries.id", ondelete="CASCADE"))
    version: Mapped[str] = mapped_column(String(100))
