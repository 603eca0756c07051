"""function_versions.resources, package_deployment_events (contract 11)

`resources: {memory_mb, cpus, timeout_s}` or `profile: compute`, resolved to the declared
figures; NULL when the function declares none (the worker's limits apply).
`package_deployment_events`: the history of a package's current version (deployed, promoted,
rolled back).
"""

from __future__ import annotations

from alembic import op

from calcgraph.migrations.columns import Cascading, create_table, document, identity, key, text

revision = "0006_lifecycle"
down_revision = "0006_runctl"


def upgrade() -> None:
    with op.batch_alter_table("function_versions") as batch:
        batch.add_column(document("resources", nullable=True))
    create_table(
        "package_deployment_events",
        key("package_id"),
        text("version", 100),
        text("action", 20),
        text("reason", 500, nullable=True),
        *identity(),
        references={"package_id": Cascading("packages")},
        indexes={"ix_package_deployment_events_package": ["package_id", "created_at"]},
    )


def downgrade() -> None:
    op.drop_index("ix_package_deployment_events_package", table_name="package_deployment_events")
    op.drop_table("package_deployment_events")
    with op.batch_alter_table("function_versions") as batch:
        batch.drop_column("resources")
