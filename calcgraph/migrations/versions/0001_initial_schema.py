"""initial schema"""

import sqlalchemy as sa
from alembic import op

import calcgraph.db.base

revision = "0001"
down_revision = None
TABLES = (
    "code_blobs",
    "organizations",
    "users",
    "memberships",
    "packages",
    "workflows",
    "functions",
    "package_versions",
    "workflow_versions",
    "function_versions",
    "workflow_runs",
    "builds",
    "jobs",
    "node_states",
    "package_version_functions",
)
"""Created in this order."""


def upgrade() -> None:
    op.create_table(
        "code_blobs",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_code_blobs")),
    )
    op.create_table(
        "organizations",
        sa.Column("slug", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_organizations")),
        sa.UniqueConstraint("slug", name=op.f("uq_organizations_slug")),
    )
    op.create_table(
        "users",
        sa.Column("subject", sa.String(length=255), nullable=False),
        sa.Column("username", sa.String(length=255), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("given_name", sa.String(length=255), nullable=True),
        sa.Column("family_name", sa.String(length=255), nullable=True),
        sa.Column("roles", calcgraph.db.base.JSONType, nullable=False),
        sa.Column("updated_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_users")),
        sa.UniqueConstraint("subject", name=op.f("uq_users_subject")),
        sa.UniqueConstraint("username", name=op.f("uq_users_username")),
    )
    op.create_table(
        "memberships",
        sa.Column("organization_id", sa.String(length=36), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("role", sa.String(length=20), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_memberships_organization_id_organizations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_memberships_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("organization_id", "user_id", name=op.f("pk_memberships")),
    )
    op.create_index(op.f("ix_memberships_user_id"), "memberships", ["user_id"])
    op.create_table(
        "packages",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=True),
        sa.Column("visibility", sa.String(length=20), nullable=False),
        sa.Column("description", sa.String(length=2000), nullable=True),
        sa.Column("updated_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_packages_organization_id_organizations"),
        ),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_packages_owner_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_packages")),
        sa.UniqueConstraint("name", name=op.f("uq_packages_name")),
    )
    op.create_index(op.f("ix_packages_organization_id"), "packages", ["organization_id"])
    op.create_index(op.f("ix_packages_owner_id"), "packages", ["owner_id"])
    op.create_index("ix_packages_visibility_org", "packages", ["visibility", "organization_id"])
    op.create_table(
        "workflows",
        sa.Column("slug", sa.String(length=100), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("owner_id", sa.String(length=36), nullable=False),
        sa.Column("organization_id", sa.String(length=36), nullable=True),
        sa.Column("visibility", sa.String(length=20), nullable=False),
        sa.Column("latest_version", sa.Integer(), nullable=False),
        sa.Column("updated_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["organization_id"],
            ["organizations.id"],
            name=op.f("fk_workflows_organization_id_organizations"),
        ),
        sa.ForeignKeyConstraint(
            ["owner_id"], ["users.id"], name=op.f("fk_workflows_owner_id_users")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflows")),
        sa.UniqueConstraint("slug", name=op.f("uq_workflows_slug")),
    )
    op.create_index(op.f("ix_workflows_owner_id"), "workflows", ["owner_id"])
    op.create_table(
        "functions",
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("package_id", sa.String(length=36), nullable=False),
        sa.Column("current_version", sa.String(length=100), nullable=True),
        sa.Column("current_version_id", sa.String(length=36), nullable=True),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["package_id"],
            ["packages.id"],
            name=op.f("fk_functions_package_id_packages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_functions")),
        sa.UniqueConstraint("package_id", "name", name=op.f("uq_functions_package_id_name")),
    )
    op.create_table(
        "package_versions",
        sa.Column("package_id", sa.String(length=36), nullable=False),
        sa.Column("version", sa.String(length=100), nullable=False),
        sa.Column("git_ref", sa.String(length=255), nullable=True),
        sa.Column("git_commit", sa.String(length=40), nullable=True),
        sa.Column("is_latest", sa.Boolean(), nullable=False),
        sa.Column("is_stable", sa.Boolean(), nullable=False),
        sa.Column("manifest", calcgraph.db.base.JSONType, nullable=False),
        sa.Column("files", calcgraph.db.base.JSONType, nullable=False),
        sa.Column("changelog", calcgraph.db.base.JSONType, nullable=True),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["package_id"],
            ["packages.id"],
            name=op.f("fk_package_versions_package_id_packages"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_package_versions")),
        sa.UniqueConstraint(
            "package_id", "version", name=op.f("uq_package_versions_package_id_version")
        ),
    )
    op.create_table(
        "workflow_versions",
        sa.Column("workflow_id", sa.String(length=36), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("graph", calcgraph.db.base.JSONType, nullable=False),
        sa.Column("resolved_functions", calcgraph.db.base.JSONType, nullable=False),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["workflow_id"],
            ["workflows.id"],
            name=op.f("fk_workflow_versions_workflow_id_workflows"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_versions")),
        sa.UniqueConstraint(
            "workflow_id", "version", name=op.f("uq_workflow_versions_workflow_id_version")
        ),
    )
    op.create_table(
        "function_versions",
        sa.Column("function_id", sa.String(length=36), nullable=False),
        sa.Column("package_version_id", sa.String(length=36), nullable=False),
        sa.Column("version", sa.String(length=100), nullable=False),
        sa.Column("handler", sa.String(length=300), nullable=False),
        sa.Column("code_checksum", sa.String(length=64), nullable=False),
        sa.Column("inputs_schema", calcgraph.db.base.JSONType, nullable=True),
        sa.Column("outputs_schema", calcgraph.db.base.JSONType, nullable=True),
        sa.Column("typed", sa.Boolean(), nullable=False),
        sa.Column("changelog", sa.String(length=4000), nullable=True),
        sa.Column("is_breaking_change", sa.Boolean(), nullable=False),
        sa.Column("deprecated", sa.Boolean(), nullable=False),
        sa.Column("deprecated_message", sa.String(length=2000), nullable=True),
        sa.Column("removal_version", sa.String(length=100), nullable=True),
        sa.Column("deployed_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["function_id"],
            ["functions.id"],
            name=op.f("fk_function_versions_function_id_functions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["package_version_id"],
            ["package_versions.id"],
            name=op.f("fk_function_versions_package_version_id_package_versions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_function_versions")),
        sa.UniqueConstraint(
            "function_id", "version", name=op.f("uq_function_versions_function_id_version")
        ),
    )
    op.create_index(
        op.f("ix_function_versions_package_version_id"),
        "function_versions",
        ["package_version_id"],
    )
    op.create_table(
        "workflow_runs",
        sa.Column("workflow_id", sa.String(length=36), nullable=False),
        sa.Column("workflow_version_id", sa.String(length=36), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("inputs", calcgraph.db.base.JSONType, nullable=False),
        sa.Column("resolved_inputs", calcgraph.db.base.JSONType, nullable=False),
        sa.Column("terminal_outputs", calcgraph.db.base.JSONType, nullable=True),
        sa.Column("error_message", sa.String(length=4000), nullable=True),
        sa.Column("first_failed_node_key", sa.String(length=200), nullable=True),
        sa.Column("plan_snapshot", calcgraph.db.base.JSONType, nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("started_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.Column("completed_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_workflow_runs_user_id_users")
        ),
        sa.ForeignKeyConstraint(
            ["workflow_id"],
            ["workflows.id"],
            name=op.f("fk_workflow_runs_workflow_id_workflows"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["workflow_version_id"],
            ["workflow_versions.id"],
            name=op.f("fk_workflow_runs_workflow_version_id_workflow_versions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_workflow_runs")),
    )
    op.create_index("ix_workflow_runs_status", "workflow_runs", ["status"])
    op.create_index("ix_workflow_runs_user_started", "workflow_runs", ["user_id", "started_at"])
    op.create_index(
        "ix_workflow_runs_workflow_started", "workflow_runs", ["workflow_id", "started_at"]
    )
    op.create_table(
        "builds",
        sa.Column("function_id", sa.String(length=36), nullable=False),
        sa.Column("function_version_id", sa.String(length=36), nullable=True),
        sa.Column("build_status", sa.String(length=20), nullable=False),
        sa.Column("docker_image", sa.String(length=500), nullable=True),
        sa.Column("image_size", sa.BigInteger(), nullable=True),
        sa.Column("build_duration", sa.Float(), nullable=True),
        sa.Column("log_key", sa.String(length=500), nullable=True),
        sa.Column("reason", sa.String(length=4000), nullable=True),
        sa.Column("vulnerabilities", calcgraph.db.base.JSONType, nullable=True),
        sa.Column("finished_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("last_pulled_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["function_id"],
            ["functions.id"],
            name=op.f("fk_builds_function_id_functions"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["function_version_id"],
            ["function_versions.id"],
            name=op.f("fk_builds_function_version_id_function_versions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_builds")),
    )
    op.create_index(op.f("ix_builds_function_id"), "builds", ["function_id"])
    op.create_table(
        "jobs",
        sa.Column("function_id", sa.String(length=36), nullable=False),
        sa.Column("function_version_id", sa.String(length=36), nullable=False),
        sa.Column("package_id", sa.String(length=36), nullable=False),
        sa.Column("user_id", sa.String(length=36), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("inputs", calcgraph.db.base.JSONType, nullable=False),
        sa.Column("resolved_inputs", calcgraph.db.base.JSONType, nullable=False),
        sa.Column("outputs", calcgraph.db.base.JSONType, nullable=True),
        sa.Column("error", calcgraph.db.base.JSONType, nullable=True),
        sa.Column("logs", sa.Text(), nullable=True),
        sa.Column("cache_hit", sa.Boolean(), nullable=False),
        sa.Column("workflow_run_id", sa.String(length=36), nullable=True),
        sa.Column("node_key", sa.String(length=200), nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("deliveries", sa.Integer(), nullable=False),
        sa.Column("started_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["function_id"], ["functions.id"], name=op.f("fk_jobs_function_id_functions")
        ),
        sa.ForeignKeyConstraint(
            ["function_version_id"],
            ["function_versions.id"],
            name=op.f("fk_jobs_function_version_id_function_versions"),
        ),
        sa.ForeignKeyConstraint(
            ["package_id"], ["packages.id"], name=op.f("fk_jobs_package_id_packages")
        ),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=op.f("fk_jobs_user_id_users")),
        sa.ForeignKeyConstraint(
            ["workflow_run_id"],
            ["workflow_runs.id"],
            name=op.f("fk_jobs_workflow_run_id_workflow_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint(
            "workflow_run_id",
            "node_key",
            "attempt",
            name=op.f("uq_jobs_workflow_run_id_node_key_attempt"),
        ),
    )
    op.create_index(op.f("ix_jobs_function_id"), "jobs", ["function_id"])
    op.create_index(op.f("ix_jobs_package_id"), "jobs", ["package_id"])
    op.create_index("ix_jobs_status_created", "jobs", ["status", "created_at"])
    op.create_index("ix_jobs_user_created", "jobs", ["user_id", "created_at"])
    op.create_table(
        "node_states",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("node_key", sa.String(length=200), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=True),
        sa.Column("outputs", calcgraph.db.base.JSONType, nullable=True),
        sa.Column("error", calcgraph.db.base.JSONType, nullable=True),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("started_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.Column("finished_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["workflow_runs.id"],
            name=op.f("fk_node_states_run_id_workflow_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "node_key", name=op.f("pk_node_states")),
    )
    op.create_index("ix_node_states_run_status", "node_states", ["run_id", "status"])
    op.create_table(
        "package_version_functions",
        sa.Column("package_version_id", sa.String(length=36), nullable=False),
        sa.Column("function_version_id", sa.String(length=36), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("deployed_at", calcgraph.db.base.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["function_version_id"],
            ["function_versions.id"],
            name=op.f("fk_package_version_functions_function_version_id_function_versions"),
        ),
        sa.ForeignKeyConstraint(
            ["package_version_id"],
            ["package_versions.id"],
            name=op.f("fk_package_version_functions_package_version_id_package_versions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint(
            "package_version_id", "function_version_id", name=op.f("pk_package_version_functions")
        ),
    )
    op.create_index(
        op.f("ix_package_version_functions_function_version_id"),
        "package_version_functions",
        ["function_version_id"],
    )


def downgrade() -> None:
    # A table takes its indexes with it; the newest first (foreign keys).
    for table in reversed(TABLES):
        op.drop_table(table)
