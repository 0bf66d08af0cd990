"""chat ids as text (Slack's "C0123", "1700000000.000100" beside Telegram's numbers); chat_record

Telegram's integer chat, message and user ids are kept as their decimal text ("-100200300"), so
every existing prompt and digest page is found again under the same ids. Downgrading turns them
back into integers (a row with a non-numeric id, from another platform, cannot go back: drop it
first).

Revision ID: 0005
Revises: 0004
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# (table, column, nullable) whose type changes.
_COLUMNS = (
    ("chat_prompt", "chat_id", False),
    ("chat_prompt", "message_id", False),
    ("chat_prompt", "user_id", False),
    ("chat_digest", "chat_id", False),
    ("chat_digest", "message_id", True),
)


def _retype(to_text: bool) -> None:
    text: sa.types.TypeEngine[Any] = sqlmodel.sql.sqltypes.AutoString(length=64)
    number: sa.types.TypeEngine[Any] = sa.BigInteger()
    old, new = (number, text) if to_text else (text, number)
    if op.get_bind().dialect.name == "postgresql":
        cast = "text" if to_text else "bigint"
        for table, column, nullable in _COLUMNS:
            op.alter_column(
                table, column, existing_type=old, type_=new, existing_nullable=nullable,
                postgresql_using=f"{column}::{cast}",
            )  # fmt: skip
        return
    # SQLite: batch mode copies each table into one with the new column types; the copy's
    # CAST turns 42 into '42' and back.
    for table in ("chat_prompt", "chat_digest"):
        with op.batch_alter_table(table) as batch_op:
            for name, column, nullable in _COLUMNS:
                if name == table:
                    batch_op.alter_column(
                        column, existing_type=old, type_=new, existing_nullable=nullable
                    )


def upgrade() -> None:
    _retype(to_text=True)
    op.create_table(
        "chat_record",
        sa.Column("channel", sqlmodel.sql.sqltypes.AutoString(length=32), nullable=False),
        sa.Column("key", sqlmodel.sql.sqltypes.AutoString(length=200), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("channel", "key"),
    )


def downgrade() -> None:
    op.drop_table("chat_record")
    _retype(to_text=False)
