"""events.run_id: the workflow run an event belongs to (the pull's `run` filter)

A run event's own subject, a job event's `data.run_id`; null for every other event. Indexed
with the position, so a run page's long-poll reads one index range of its run's events instead
of the jobs of the run. Events already kept are given theirs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009_events_run"
down_revision = "0008_canary"


def upgrade() -> None:
    op.add_column("events", sa.Column("run_id", sa.String(length=36), nullable=True))
    op.execute("UPDATE events SET run_id = subject WHERE subject_kind = 'run'")
    if op.get_bind().dialect.name == "postgresql":
        run_of_job = "data->>'run_id'"
    else:
        run_of_job = "json_extract(data, '$.run_id')"
    op.execute(f"UPDATE events SET run_id = {run_of_job} WHERE subject_kind = 'job'")
    op.create_index("ix_events_run_position", "events", ["run_id", "position"])


def downgrade() -> None:
    op.drop_index("ix_events_run_position", table_name="events")
    with op.batch_alter_table("events") as batch_op:
        batch_op.drop_column("run_id")
