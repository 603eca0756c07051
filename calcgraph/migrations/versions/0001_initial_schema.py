"""initial schema"""

import sqlalchemy as sa
from alembic import op

from calcgraph.migrations.columns import (
    Cascading,
    Column,
    create_table,
    document,
    flag,
    identity,
    key,
    moment,
    number,
    text,
)

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


def _owned() -> tuple[Column, Column, Column]:
    """A package's or workflow's owner: a user, perhaps sharing it with an organization."""
    return key("owner_id"), key("organization_id", nullable=True), text("visibility", 20)


_OWNERS = {"organization_id": "organizations", "owner_id": "users"}


def upgrade() -> None:
    create_table(
        "code_blobs",
        text("sha256", 64),
        sa.Column("content", sa.LargeBinary(), nullable=False),
        number("size"),
        primary_key=("sha256",),
    )
    create_table(
        "organizations",
        text("slug", 100),
        text("name", 255),
        *identity(),
        unique=[("slug",)],
    )
    create_table(
        "users",
        text("subject", 255),
        text("username", 255),
        text("email", 320, nullable=True),
        text("given_name", 255, nullable=True),
        text("family_name", 255, nullable=True),
        document("roles"),
        moment("updated_at"),
        *identity(),
        unique=[("subject",), ("username",)],
    )
    create_table(
        "memberships",
        key("organization_id"),
        key("user_id"),
        text("role", 20),
        moment("created_at"),
        references={"organization_id": Cascading("organizations"), "user_id": Cascading("users")},
        primary_key=("organization_id", "user_id"),
        indexed=("user_id",),
    )
    create_table(
        "packages",
        text("name", 200),
        *_owned(),
        text("description", 2000, nullable=True),
        moment("updated_at"),
        *identity(),
        references=_OWNERS,
        unique=[("name",)],
        indexed=("organization_id", "owner_id"),
        indexes={"ix_packages_visibility_org": ["visibility", "organization_id"]},
    )
    create_table(
        "workflows",
        text("slug", 100),
        text("name", 255),
        *_owned(),
        number("latest_version"),
        moment("updated_at"),
        *identity(),
        references=_OWNERS,
        unique=[("slug",)],
        indexed=("owner_id",),
    )
    create_table(
        "functions",
        text("name", 200),
        key("package_id"),
        text("current_version", 100, nullable=True),
        key("current_version_id", nullable=True),
        *identity(),
        references={"package_id": Cascading("packages")},
        unique=[("package_id", "name")],
    )
    create_table(
        "package_versions",
        key("package_id"),
        text("version", 100),
        text("git_ref", 255, nullable=True),
        text("git_commit", 40, nullable=True),
        flag("is_latest"),
        flag("is_stable"),
        document("manifest"),
        document("files"),
        document("changelog", nullable=True),
        *identity(),
        references={"package_id": Cascading("packages")},
        unique=[("package_id", "version")],
    )
    create_table(
        "workflow_versions",
        key("workflow_id"),
        number("version"),
        document("graph"),
        document("resolved_functions"),
        *identity(),
        references={"workflow_id": Cascading("workflows")},
        unique=[("workflow_id", "version")],
    )
    create_table(
        "function_versions",
        key("function_id"),
        key("package_version_id"),
        text("version", 100),
        text("handler", 300),
        text("code_checksum", 64),
        document("inputs_schema", nullable=True),
        document("outputs_schema", nullable=True),
        flag("typed"),
        text("changelog", 4000, nullable=True),
        flag("is_breaking_change"),
        flag("deprecated"),
        text("deprecated_message", 2000, nullable=True),
        text("removal_version", 100, nullable=True),
        moment("deployed_at"),
        *identity(),
        references={
            "function_id": Cascading("functions"),
            "package_version_id": "package_versions",
        },
        unique=[("function_id", "version")],
        indexed=("package_version_id",),
    )
    create_table(
        "workflow_runs",
        key("workflow_id"),
        key("workflow_version_id"),
        key("user_id"),
        text("status", 20),
        document("inputs"),
        document("resolved_inputs"),
        document("terminal_outputs", nullable=True),
        text("error_message", 4000, nullable=True),
        text("first_failed_node_key", 200, nullable=True),
        document("plan_snapshot"),
        number("revision"),
        moment("started_at"),
        moment("completed_at", nullable=True),
        key("id"),
        references={
            "user_id": "users",
            "workflow_id": Cascading("workflows"),
            "workflow_version_id": "workflow_versions",
        },
        indexes={
            "ix_workflow_runs_status": ["status"],
            "ix_workflow_runs_user_started": ["user_id", "started_at"],
            "ix_workflow_runs_workflow_started": ["workflow_id", "started_at"],
        },
    )
    create_table(
        "builds",
        key("function_id"),
        key("function_version_id", nullable=True),
        text("build_status", 20),
        text("docker_image", 500, nullable=True),
        sa.Column("image_size", sa.BigInteger(), nullable=True),
        sa.Column("build_duration", sa.Float(), nullable=True),
        text("log_key", 500, nullable=True),
        text("reason", 4000, nullable=True),
        document("vulnerabilities", nullable=True),
        moment("finished_at", nullable=True),
        moment("last_pulled_at", nullable=True),
        *identity(),
        references={
            "function_id": Cascading("functions"),
            "function_version_id": "function_versions",
        },
        indexed=("function_id",),
    )
    create_table(
        "jobs",
        key("function_id"),
        key("function_version_id"),
        key("package_id"),
        key("user_id"),
        text("status", 20),
        document("inputs"),
        document("resolved_inputs"),
        document("outputs", nullable=True),
        document("error", nullable=True),
        sa.Column("logs", sa.Text(), nullable=True),
        flag("cache_hit"),
        key("workflow_run_id", nullable=True),
        text("node_key", 200, nullable=True),
        number("attempt"),
        number("deliveries"),
        moment("started_at", nullable=True),
        moment("finished_at", nullable=True),
        *identity(),
        references={
            "function_id": "functions",
            "function_version_id": "function_versions",
            "package_id": "packages",
            "user_id": "users",
            "workflow_run_id": Cascading("workflow_runs"),
        },
        unique=[("workflow_run_id", "node_key", "attempt")],
        indexed=("function_id", "package_id"),
        indexes={
            "ix_jobs_status_created": ["status", "created_at"],
            "ix_jobs_user_created": ["user_id", "created_at"],
        },
    )
    create_table(
        "node_states",
        key("run_id"),
        text("node_key", 200),
        text("kind", 20),
        text("status", 20),
        key("job_id", nullable=True),
        document("outputs", nullable=True),
        document("error", nullable=True),
        number("attempt"),
        moment("started_at", nullable=True),
        moment("finished_at", nullable=True),
        references={"run_id": Cascading("workflow_runs")},
        primary_key=("run_id", "node_key"),
        indexes={"ix_node_states_run_status": ["run_id", "status"]},
    )
    create_table(
        "package_version_functions",
        key("package_version_id"),
        key("function_version_id"),
        text("status", 20),
        moment("deployed_at"),
        references={
            "function_version_id": "function_versions",
            "package_version_id": Cascading("package_versions"),
        },
        primary_key=("package_version_id", "function_version_id"),
        indexed=("function_version_id",),
    )


def downgrade() -> None:
    # A table takes its indexes with it; the newest first (foreign keys).
    for table in reversed(TABLES):
        op.drop_table(table)
