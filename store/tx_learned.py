"""Rules learned from decisions (bot.ports.LearnedRuleTx): the workspace's list of them. The
rules a run consults are copied onto the run itself (`run.learned_rules`, store/tx_runs.py)."""

from __future__ import annotations

import sqlalchemy as sa

from bot.learning import LearnedRule
from store import convert as cv
from store.txbase import LEARNED_RULE, TxBase


class LearnedRuleTx(TxBase):
    async def insert_learned_rule(self, rule: LearnedRule) -> None:
        await self._insert(LEARNED_RULE, cv.learned_rule_values(rule))

    async def get_learned_rule(self, rule_id: str) -> LearnedRule | None:
        row = await self._one(sa.select(LEARNED_RULE).where(LEARNED_RULE.c.id == rule_id))
        return cv.learned_rule(row) if row else None

    async def learned_rules(
        self, workspace_id: str, *, profile: str | None = None
    ) -> list[LearnedRule]:
        """The workspace's learned rules, oldest first; with `profile`, that profile's only."""
        stmt = sa.select(LEARNED_RULE).where(LEARNED_RULE.c.workspace_id == workspace_id)
        if profile is not None:
            stmt = stmt.where(LEARNED_RULE.c.scope == "profile", LEARNED_RULE.c.profile == profile)
        stmt = stmt.order_by(LEARNED_RULE.c.created_at, LEARNED_RULE.c.id)
        return [cv.learned_rule(r) for r in await self._all(stmt)]

    async def delete_learned_rule(self, rule_id: str) -> bool:
        result = await self.conn.execute(
            sa.delete(LEARNED_RULE).where(LEARNED_RULE.c.id == rule_id)
        )
        return bool(result.rowcount)
