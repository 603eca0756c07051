"""tick at scale: node state revisions, chain starts

The tick reads what changed, not the whole run: node states remember the revision that last
wrote them (indexed with the run, for `tick?since=N`), and the jobs chain workers start for
pending nodes are listed in `chain_starts` until a tick adopts them.
"""

import sqlalchemy as sa
from alembic import op

from calcgraph.migrations.columns import Cascading, create_table, key

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("node_states", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revision", sa.Integer(), server_default="0", nullable=False))
        batch_op.create_index("ix_node_states_run_revision", ["run_id", "revision"], unique=False)
    create_table(
        "chain_starts",
        key("run_id"),
        key("job_id"),
        references={"run_id": Cascading("workflow_runs")},
        primary_key=("run_id", "job_id"),
    )
    # Jobs chain workers started before this revision and no tick adopted yet: what the tick
    # found by probing every job of the run until now (a job at the attempt after a pending
    # node's). Without them, a run in flight would resubmit those nodes.
    op.execute(
        "INSERT INTO chain_starts (run_id, job_id) "
        "SELECT jobs.workflow_run_id, jobs.id FROM jobs JOIN node_states "
        "ON node_states.run_id = jobs.workflow_run_id AND node_states.node_key = jobs.node_key "
        "WHERE node_states.status = 'pending' AND jobs.attempt = node_states.attempt + 1"
    )


def downgrade() -> None:
    op.drop_table("chain_starts")
    with op.batch_alter_table("node_states", schema=None) as batch_op:
        batch_op.drop_index("ix_node_states_run_revision")
        batch_op.drop_column("revision")
