"""rules learned from decisions ("approve always"), and the input a person approved after
editing it ("edit before approve")

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STR = sqlmodel.sql.sqltypes.AutoString


def upgrade() -> None:
    op.create_table(
        "learned_rule",
        sa.Column("id", _STR(length=40), nullable=False),
        sa.Column("workspace_id", _STR(length=64), nullable=False),
        sa.Column("scope", _STR(length=16), nullable=False),
        sa.Column("profile", _STR(length=200), nullable=True),
        sa.Column("run_id", _STR(length=40), nullable=True),
        sa.Column("rule", sa.JSON(), nullable=False),
        sa.Column("added_by", _STR(length=200), nullable=False),
        sa.Column("from_run_id", _STR(length=40), nullable=False),
        sa.Column("from_key", _STR(length=200), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_learned_rule_workspace_id", "learned_rule", ["workspace_id"])
    with op.batch_alter_table("run") as batch_op:
        batch_op.add_column(sa.Column("learned_rules", sa.JSON(), nullable=True))
        batch_op.add_column(
            sa.Column("rules_version", sa.Integer(), nullable=False, server_default="0")
        )
    with op.batch_alter_table("task") as batch_op:
        batch_op.add_column(sa.Column("approved_input", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("task") as batch_op:
        batch_op.drop_column("approved_input")
    with op.batch_alter_table("run") as batch_op:
        batch_op.drop_column("rules_version")
        batch_op.drop_column("learned_rules")
    op.drop_index("ix_learned_rule_workspace_id", table_name="learned_rule")
    op.drop_table("learned_rule")
