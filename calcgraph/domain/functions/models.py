from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, ForeignKey, Index, String, UniqueConstraint, func, literal_column
from sqlalchemy.orm import Mapped, mapped_column

from calcgraph.db.base import Base, IdMixin, JSONType, TimestampMixin, utcnow


class Function(IdMixin, TimestampMixin, Base):
    __tablename__ = "functions"
    __table_args__ = (
        UniqueConstraint("package_id", "name"),
        # Within a package, function names are unique without regard to case (contract 8b).
        Index(
            "uq_functions_package_name_nocase",
            "package_id",
            func.lower(literal_column("name")),
            unique=True,
        ),
    )

    name: Mapped[str] = mapped_column(String(200))
    package_id: Mapped[str] = mapped_column(ForeignKey("packages.id", ondelete="CASCADE"))
    current_version: Mapped[str | None] = mapped_column(String(100))
    # No foreign key: function and function_versions reference each other, and SQLite
    # cannot add a constraint after the fact. The service keeps it consistent.
    current_version_id: Mapped[str | None] = mapped_column(String(36))


class FunctionVersion(IdMixin, TimestampMixin, Base):
    """Immutable once written: a new deployment that changes anything writes a new row."""

    __tablename__ = "function_versions"
    __table_args__ = (UniqueConstraint("function_id", "version"),)

    function_id: Mapped[str] = mapped_column(ForeignKey("functions.id", ondelete="CASCADE"))
    package_version_id: Mapped[str] = mapped_column(ForeignKey("package_versions.id"), index=True)
    version: Mapped[str] = mapped_column(String(100))
    handler: Mapped[str] = mapped_column(String(300))
    code_checksum: Mapped[str] = mapped_column(String(64))
    inputs_schema: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    outputs_schema: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    typed: Mapped[bool] = mapped_column(Boolean, default=False)
    """True when inputs and outputs are declared: only typed functions can be workflow nodes."""
    changelog: Mapped[str | None] = mapped_column(String(4000))
    is_breaking_change: Mapped[bool] = mapped_column(Boolean, default=False)
    deprecated: Mapped[bool] = mapped_column(Boolean, default=False)
    deprecated_message: Mapped[str | None] = mapped_column(String(2000))
    removal_version: Mapped[str | None] = mapped_column(String(100))
    resources: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    """Declared limits `{memory_mb, cpus, timeout_s}` (contract 11); None: the worker's."""
    deployed_at: Mapped[datetime] = mapped_column(default=utcnow)
