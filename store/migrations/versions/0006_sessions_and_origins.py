"""web sessions kept server-side (sign-out and token rotation end them); the origins an
application may claim

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "web_session",
        sa.Column("id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("member_id", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("workspace_id", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_web_session_member_id", "web_session", ["member_id"])
    with op.batch_alter_table("application") as batch_op:
        batch_op.add_column(
            sa.Column(
                "may_claim", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=False,
                server_default="",
            )
        )  # fmt: skip


def downgrade() -> None:
    with op.batch_alter_table("application") as batch_op:
        batch_op.drop_column("may_claim")
    op.drop_index("ix_web_session_member_id", table_name="web_session")
    op.drop_table("web_session")
