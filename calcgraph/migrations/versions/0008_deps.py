"""Pinned package dependencies (contract 11, Dependencies)

Each package version's dependency closure as resolved at its deployment: the direct
dependencies with their declared range, and the ones they brought along as they were pinned.
"""

from __future__ import annotations

from alembic import op

from calcgraph.migrations.columns import Cascading, create_table, flag, key, text

revision = "0008_deps"
down_revision = "0007_names_nocase"


def upgrade() -> None:
    create_table(
        "package_version_dependencies",
        key("package_version_id"),
        key("dependency_version_id"),
        flag("direct"),
        text("range", 200, nullable=True),
        references={
            "dependency_version_id": "package_versions",
            "package_version_id": Cascading("package_versions"),
        },
        primary_key=("package_version_id", "dependency_version_id"),
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
