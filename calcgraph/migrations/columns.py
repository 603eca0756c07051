"""The columns, keys and tables the revision files write, in one place.

A revision is history: a database migrated today must get what one migrated a year ago got.
So what a helper here returns never changes; a revision that needs something else gets a new
helper (or writes it out). Constraint names follow the models' naming convention
(`calcgraph.db.base.NAMING_CONVENTION`), spelled out here and marked final with `op.f`, so
that a revision does not depend on the convention of the day.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from alembic import op

from calcgraph.db.base import JSONType, UTCDateTime

Column = sa.Column[Any]


def key(name: str, *, nullable: bool = False) -> Column:
    """An identifier: a row's own (`id`) or one it refers to."""
    return sa.Column(name, sa.String(length=36), nullable=nullable)


def text(name: str, length: int, *, nullable: bool = False) -> Column:
    return sa.Column(name, sa.String(length=length), nullable=nullable)


def moment(name: str, *, nullable: bool = False) -> Column:
    return sa.Column(name, UTCDateTime(timezone=True), nullable=nullable)


def document(name: str, *, nullable: bool = False) -> Column:
    return sa.Column(name, JSONType, nullable=nullable)


def flag(name: str, *, nullable: bool = False) -> Column:
    return sa.Column(name, sa.Boolean(), nullable=nullable)


def number(name: str, *, nullable: bool = False) -> Column:
    return sa.Column(name, sa.Integer(), nullable=nullable)


def identity() -> tuple[Column, Column]:
    """`id` and `created_at`, the last two columns of a table whose model has both mixins."""
    return key("id"), moment("created_at")


class Cascading(NamedTuple):
    """A foreign key whose rows go with the row they refer to."""

    table: str


def create_table(
    name: str,
    *columns: Column,
    references: Mapping[str, str | Cascading] = {},
    primary_key: Sequence[str] = ("id",),
    unique: Sequence[Sequence[str]] = (),
    indexed: Sequence[str] = (),
    indexes: Mapping[str, Sequence[str]] = {},
) -> None:
    """`op.create_table` with named keys, then its indexes.

    A foreign key from each column of `references` to that table's `id`, the primary key, a
    unique constraint for each group of `unique`; an index named by the convention
    (`ix_<table>_<column>`) on each column of `indexed`, then the named `indexes`."""
    foreign_keys = []
    for column, target in references.items():
        table = target.table if isinstance(target, Cascading) else target
        foreign_keys.append(
            sa.ForeignKeyConstraint(
                [column],
                [f"{table}.id"],
                name=op.f(f"fk_{name}_{column}_{table}"),
                ondelete="CASCADE" if isinstance(target, Cascading) else None,
            )
        )
    op.create_table(
        name,
        *columns,
        *foreign_keys,
        sa.PrimaryKeyConstraint(*primary_key, name=op.f(f"pk_{name}")),
        *(
            sa.UniqueConstraint(*group, name=op.f(f"uq_{name}_{'_'.join(group)}"))
            for group in unique
        ),
    )
    for column in indexed:
        op.create_index(op.f(f"ix_{name}_{column}"), name, [column])
    for index, index_columns in indexes.items():
        op.create_index(index, name, list(index_columns))
