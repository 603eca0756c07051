"""Package names and function names (within their package) unique without regard to case

Contract 8b: the service refused a name differing only in case, but two concurrent first
deployments of `PUB-x` and `pub-x` could both pass its check; these unique indexes on
`lower(name)` make the database hold the rule too. Organization slugs are lowercase only
(validated), so their plain unique constraint already holds it.

SQLite cannot reflect expression indexes: a later `batch_alter_table` on `packages` or
`functions` (which rebuilds the table from reflection) must create these two again.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_names_nocase"
down_revision = "0006_lifecycle"


def upgrade() -> None:
    op.create_index(
        "uq_packages_name_nocase",
        "packages",
        [sa.func.lower(sa.literal_column("name"))],
        unique=True,
    )
    op.create_index(
        "uq_functions_package_name_nocase",
        "functions",
        ["package_id", sa.func.lower(sa.literal_column("name"))],
        unique=True,
    )


def downgrade() -> None:
    op.drop_index("uq_functions_package_name_nocase", table_name="functions")
    op.drop_index("uq_packages_name_nocase", table_name="packages")
