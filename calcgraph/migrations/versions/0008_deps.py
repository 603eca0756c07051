"""Pinned package dependencies (contract 11, Dependencies)

Each package version's dependency closure as resolved at its deployment: the direct
dependencies with their declared range, and the ones they brought along as they were pinned.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_deps"
down_revision = "0007_names_nocase"


def upgrade() -> None:
    op.create_table(
        "package_version_dependencies",
        sa.Column("package_version_id", sa.String(length=36), nullable=False),
        sa.Column("dependency_version_id", sa.String(length=36), nullable=False),
        sa.Column("direct", sa.Boolean(), nullable=False),
        sa.Column("range", sa.String(length=200), nullable=True),
        sa.ForeignKeyConstraint(
            ["dependency_version_id"],
            ["package_versions.id"],
            name=op.f("fk_package_version_dependencies_dependency_version_id_package_versions"),
        ),
        sa.ForeignKeyConstraint(
            ["package_version_id"],
            ["package_versions.id"],
            name=op.f("fk_package_version_dependencies_package_version_id_package_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "package_version_id",
            "dependency_version_id",
            name=op.f("pk_package_version_dependencies"),
        ),
    )
    with op.batch_alter_table("package_version_dependencies", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_package_version_dependencies_dependency_version_id"),
            ["dependency_version_id"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("package_version_dependencies", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_package_version_dependencies_dependency_version_id"))
    op.drop_table("package_version_dependencies")
