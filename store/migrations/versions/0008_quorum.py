"""several approvers: groups of members, a run's approval requirements, forbid_self_approval and
on_behalf_of, and a task's approvals so far with the edited input they approve

Revision ID: 0008
Revises: 0007
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STR = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    op.create_table(
        "member_group",
        sa.Column("id", _STR(length=40), nullable=False),
        sa.Column("workspace_id", _STR(length=64), nullable=False),
        sa.Column("name", _STR(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("workspace_id", "name"),
    )
    op.create_table(
        "group_member",
        sa.Column("group_id", _STR(length=40), nullable=False),
        sa.Column("member_id", _STR(length=40), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "member_id"),
    )
    op.create_index("ix_group_member_member_id", "group_member", ["member_id"])
    with op.batch_alter_table("run") as batch_op:
        batch_op.add_column(sa.Column("approval_requirements", sa.JSON(), nullable=True))
        batch_op.add_column(
            sa.Column(
                "forbid_self_approval", sa.Boolean(), nullable=False, server_default=sa.false()
            )
        )
        batch_op.add_column(sa.Column("on_behalf_of", _STR(length=200), nullable=True))
    with op.batch_alter_table("task") as batch_op:
        batch_op.add_column(sa.Column("approvals_given", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("reviewed_input", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("task") as batch_op:
        batch_op.drop_column("reviewed_input")
        batch_op.drop_column("approvals_given")
    with op.batch_alter_table("run") as batch_op:
        batch_op.drop_column("on_behalf_of")
        batch_op.drop_column("forbid_self_approval")
        batch_op.drop_column("approval_requirements")
    op.drop_index("ix_group_member_member_id", table_name="group_member")
    op.drop_table("group_member")
    op.drop_table("member_group")
