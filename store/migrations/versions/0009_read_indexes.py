"""indexes for the pages' reads: parked tasks newest first (the inbox with thousands waiting)
and one run's decision log (a run's page, the runs list)

Revision ID: 0009
Revises: 0008
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("task") as batch_op:
        batch_op.drop_index("ix_task_workspace_state")
        batch_op.create_index(
            "ix_task_workspace_state_created", ["workspace_id", "state", "created_at"]
        )
    with op.batch_alter_table("decision_log") as batch_op:
        batch_op.create_index("ix_decision_log_run", ["run_id", "id"])


def downgrade() -> None:
    with op.batch_alter_table("decision_log") as batch_op:
        batch_op.drop_index("ix_decision_log_run")
    with op.batch_alter_table("task") as batch_op:
        batch_op.drop_index("ix_task_workspace_state_created")
        batch_op.create_index("ix_task_workspace_state", ["workspace_id", "state"])
