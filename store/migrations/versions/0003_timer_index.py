"""timer index covers run_id: the clock claims due rows in index order, grouped by run

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("timer") as batch_op:
        batch_op.drop_index("ix_timer_due")
        batch_op.create_index("ix_timer_due_run", ["done", "due_at", "run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("timer") as batch_op:
        batch_op.drop_index("ix_timer_due_run")
        batch_op.create_index("ix_timer_due", ["done", "due_at"], unique=False)
