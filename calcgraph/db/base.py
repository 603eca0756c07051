"""Declarative base, portable column types and the repository base class."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any, Generic, Self, TypeVar

from sqlalchemy import JSON, ColumnElement, DateTime, MetaData, String, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


_VARIANT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}
"""A random hex digit -> the UUID variant digit it makes (its two high bits set to 10)."""


def new_id() -> str:
    """A random (version 4) UUID as text: `str(uuid.uuid4())` spelled out, at under half the
    cost (`uuid.UUID`'s checks and formatting), paid once per job a tick submits."""
    h = os.urandom(16).hex()
    # The version nibble is 4; the variant's two high bits are 10 (RFC 4122).
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on both databases (SQLite stores it naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None or value.tzinfo is UTC:  # asyncpg's are UTC already: 30,000 a big read
            return value
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


# JSONB on PostgreSQL (indexable, compact), JSON text on SQLite.
JSONType = JSON().with_variant(JSONB(), "postgresql")


class WrittenJSON(TypeDecorator[str]):
    """A parameter for a `JSONType` column given as its JSON text, written already (with
    `json.dumps`, as the column's own writing would): bound as it is, not written again. For a
    large value written once and stored many times (a version's plan, each run's snapshot)."""

    impl = JSONType
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> None:
        return None


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSONType}


class IdMixin:
    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)


class TimestampMixin:
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


M = TypeVar("M", bound=Base)


class RepositoryBase(Generic[M]):
    """All SQL of a feature lives in its repository; services get one per unit of work."""

    model: type[M]

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    @classmethod
    def from_session(cls, session: AsyncSession) -> Self:
        return cls(session)

    async def get(self, id_: str) -> M | None:
        return await self.session.get(self.model, id_)

    async def all_where(
        self, where: ColumnElement[bool], *order: Any, limit: int | None = None
    ) -> list[M]:
        """Every row of the model where `where` holds, in `order` (the first `limit`)."""
        rows = await self.session.scalars(
            select(self.model).where(where).order_by(*order).limit(limit)
        )
        return list(rows)

    async def add(self, obj: M) -> M:
        self.session.add(obj)
        await self.session.flush()
        return obj
