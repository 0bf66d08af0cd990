"""chat buttons per platform and place: chat_callback keyed by (channel, id), with the chat

A button's id used to be derived from its task, action and option alone, so Telegram and
Slack showed the same id, and the one row saved for it named whichever platform saved it
first: the other platform's presses were refused. Ids are now derived per platform and place
(adapters/chat/buttons.py) and saved under (channel, id), with the chat they are shown in.

The ids saved before stay in messages already posted, on both platforms: each such row is
copied for the other platform, with no chat (a press in any place of that platform finds it,
as before). Downgrading keeps one row per id (the first platform's, by name).

Revision ID: 0011
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PLATFORMS = ("telegram", "slack")  # the chat platforms whose buttons were saved before
TABLE = "chat_callback"


def _chat() -> sa.Column[str]:
    return sa.Column("chat", sqlmodel.sql.sqltypes.AutoString(length=64), nullable=True)


def _shaped(key: Sequence[str], *, chat: bool) -> sa.Table:
    """The table as it is (with or without `chat`), keyed by `key`: SQLite's batch mode copies
    the rows into a table of this shape (its key cannot be changed in place)."""
    text = sqlmodel.sql.sqltypes.AutoString
    columns = [
        sa.Column("id", text(length=32), nullable=False),
        sa.Column("channel", text(length=32), nullable=False),
        sa.Column("task_id", text(length=40), nullable=False),
        sa.Column("action", text(length=16), nullable=False),
        sa.Column("option", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
    ]
    if chat:
        columns.append(_chat())
    return sa.Table(
        TABLE, sa.MetaData(), *columns, sa.PrimaryKeyConstraint(*key),
        sa.Index("ix_chat_callback_task_id", "task_id"),
    )  # fmt: skip


def _rekey_postgres(key: Sequence[str]) -> None:
    bind = op.get_bind()
    name = sa.inspect(bind).get_pk_constraint(TABLE).get("name") or f"{TABLE}_pkey"
    op.drop_constraint(name, TABLE, type_="primary")
    op.create_primary_key(f"{TABLE}_pkey", TABLE, list(key))


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.add_column(TABLE, _chat())
        _rekey_postgres(["channel", "id"])
    else:
        shape = _shaped(["channel", "id"], chat=False)
        with op.batch_alter_table(TABLE, copy_from=shape, recreate="always") as batch_op:
            batch_op.add_column(_chat())
    platforms = " UNION ALL ".join(f"SELECT '{name}' AS name" for name in PLATFORMS)
    op.execute(
        f"INSERT INTO {TABLE} (channel, id, task_id, action, option, created_at, chat)"
        " SELECT p.name, c.id, c.task_id, c.action, c.option, c.created_at, NULL"
        f" FROM {TABLE} c CROSS JOIN ({platforms}) p"
        f" WHERE c.channel <> p.name AND NOT EXISTS (SELECT 1 FROM {TABLE} o"
        " WHERE o.channel = p.name AND o.id = c.id)"
    )


def downgrade() -> None:
    op.execute(
        f"DELETE FROM {TABLE} WHERE EXISTS (SELECT 1 FROM {TABLE} o"
        f" WHERE o.id = {TABLE}.id AND o.channel < {TABLE}.channel)"
    )
    if op.get_bind().dialect.name == "postgresql":
        _rekey_postgres(["id"])
        op.drop_column(TABLE, "chat")
    else:
        shape = _shaped(["id"], chat=True)
        with op.batch_alter_table(TABLE, copy_from=shape, recreate="always") as batch_op:
            batch_op.drop_column("chat")
