"""Bearer tokens: stored hashed; lookups cached briefly; revocation takes effect."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa

from bot.admin import Admin
from bot.clock import FakeClock
from store.sql import CREDENTIAL, SqlStore


async def test_tokens_are_stored_only_as_hashes(store: SqlStore) -> None:
    admin = Admin(store, FakeClock())
    await admin.create_workspace("acme")
    issued = await admin.add_member("acme", "alice")
    async with store.read() as tx:
        rows = (await tx.conn.execute(sa.select(CREDENTIAL))).mappings().all()
    assert len(rows) == 1 and issued.token not in str(dict(rows[0]))
    assert (await admin.authenticate(issued.token)) == issued.principal
    assert await admin.authenticate(issued.token + "x") is None
    assert await admin.authenticate("") is None


async def test_revocation_here_is_immediate_and_elsewhere_within_the_cache_time(
    store: SqlStore,
) -> None:
    here = Admin(store, FakeClock(), token_cache_seconds=0.3)
    other_process = Admin(store, FakeClock())
    await here.create_workspace("acme")
    alice = await here.add_member("acme", "alice")
    bob = await here.add_member("acme", "bob")
    assert await here.authenticate(alice.token) is not None
    await here.revoke("acme", "member", "alice")
    assert await here.authenticate(alice.token) is None  # this instance: at once

    assert await here.authenticate(bob.token) is not None  # cached now
    await other_process.revoke("acme", "member", "bob")
    await asyncio.sleep(0.35)
    assert await here.authenticate(bob.token) is None  # another process: within 0.3 s
    rotated = await here.rotate("acme", "member", "bob")
    assert await here.authenticate(rotated.token) == rotated.principal
