from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Float, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from calcgraph.db.base import Base, IdMixin, JSONType, TimestampMixin


class Build(IdMixin, TimestampMixin, Base):
    """One build of submitted code into an image or artifact, kept whatever its outcome."""

    __tablename__ = "builds"

    function_id: Mapped[str] = mapped_column(
        ForeignKey("functions.id", ondelete="CASCADE"), index=True
    )
    function_version_id: Mapped[str | None] = mapped_column(ForeignKey("function_versions.id"))
    build_status: Mapped[str] = mapped_column(String(20))
    """`pending`, `running`, `success`, `refused` or `failed`; `expired` once retention deleted
    the image or artifact of a successful build."""
    docker_image: Mapped[str | None] = mapped_column(String(500))
    image_size: Mapped[int | None] = mapped_column(BigInteger)
    build_duration: Mapped[float | None] = mapped_column(Float)
    log_key: Mapped[str | None] = mapped_column(String(500))
    reason: Mapped[str | None] = mapped_column(String(4000))
    vulnerabilities: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    finished_at: Mapped[datetime | None]
    last_pulled_at: Mapped[datetime | None]
