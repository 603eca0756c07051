"""jobs: the function and package of a job are its function version's, not foreign keys

A job's `function_id` and `package_id` are copies of its function version's. Their foreign
keys checked nothing the version's does not: a version cannot go while a job names it (that
key stays), and its function and package cannot go while it stays. Each cost a trigger per
inserted row: a tick that submits 1,000 jobs paid 2,000 key lookups (with locks) of 5,000,
about a quarter of its INSERT on PostgreSQL. Their indexes served no query (jobs are joined
to their package by the package's key) and cost two of six index entries per inserted row.
"""

from __future__ import annotations

from alembic import op

revision = "0004_jobs_version_keys"
down_revision = "0003"


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_constraint("fk_jobs_function_id_functions", type_="foreignkey")
        batch_op.drop_constraint("fk_jobs_package_id_packages", type_="foreignkey")
        batch_op.drop_index("ix_jobs_function_id")
        batch_op.drop_index("ix_jobs_package_id")


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_function_id", ["function_id"], unique=False)
        batch_op.create_index("ix_jobs_package_id", ["package_id"], unique=False)
        batch_op.create_foreign_key(
            "fk_jobs_function_id_functions", "functions", ["function_id"], ["id"]
        )
        batch_op.create_foreign_key(
            "fk_jobs_package_id_packages", "packages", ["package_id"], ["id"]
        )
