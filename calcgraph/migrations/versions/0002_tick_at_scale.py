"""tick at scale: node state revisions, chain starts

The tick reads what changed, not the whole run: node states remember the revision that last
wrote them (indexed with the run, for `tick?since=N`), and the jobs chain workers start for
pending nodes are listed in `chain_starts` until a tick adopts them.
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    with op.batch_alter_table("node_states", schema=None) as batch_op:
        batch_op.add_column(sa.Column("revision", sa.Integer(), server_default="0", nullable=False))
        batch_op.create_index("ix_node_states_run_revision", ["run_id", "revision"], unique=False)
    op.create_table(
        "chain_starts",
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("job_id", sa.String(length=36), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["workflow_runs.id"],
            name=op.f("fk_chain_starts_run_id_workflow_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "job_id", name=op.f("pk_chain_starts")),
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
