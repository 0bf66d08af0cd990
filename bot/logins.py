"""One-time sign-in links: a short-lived, single-use token that opens a web session for a person.

Only a hash of the token is kept (in the `meta` table, no table of its own). Using it inserts a
second meta key; the insert is a compare-and-set on every database, so a link signs in once even
when two instances see it at the same moment.
"""

from __future__ import annotations

import json
from datetime import timedelta

from bot import tokens
from bot.clock import Clock
from bot.domain import Principal
from bot.ports import DuplicateKey, Store

LOGIN_LINK_TTL = timedelta(minutes=30)
_ISSUED = "login:"
_USED = "login_used:"


def _digest(token: str) -> str:
    # meta keys hold at most 64 characters; 192 bits of SHA-256 is plenty for a lookup key.
    return tokens.token_hash(token)[:48]


async def issue(
    store: Store, clock: Clock, member: Principal, ttl: timedelta = LOGIN_LINK_TTL
) -> str:
    """A new sign-in token for `member` (a person), valid once within `ttl`."""
    if not member.is_member:
        raise ValueError("sign-in links are for people (members) only")
    token = tokens.new_token("login")
    record = {
        "id": member.id,
        "name": member.name,
        "workspace_id": member.workspace_id,
        "expires": (clock.now() + ttl).timestamp(),
    }
    async with store.write() as tx:
        await tx.set_meta(_ISSUED + _digest(token), json.dumps(record))
    return token


async def consume(store: Store, clock: Clock, token: str) -> Principal | None:
    """The person the token signs in, or None when it is unknown, expired or already used."""
    if not token.startswith(tokens.TOKEN_PREFIX["login"]) or len(token) > 200:
        return None
    if not token.isascii() or not token.isprintable():
        return None  # tokens are printable ASCII; anything else names no link
    digest = _digest(token)
    async with store.read() as tx:
        raw = await tx.get_meta(_ISSUED + digest)
    if raw is None:
        return None
    record = json.loads(raw)
    if clock.now().timestamp() >= float(record["expires"]):
        return None
    try:
        async with store.write() as tx:
            member = await tx.get_member(str(record["id"]))
            if member is None:
                return None
            await tx.set_meta(_USED + digest, str(clock.now().timestamp()))
    except DuplicateKey:
        return None  # used before
    return Principal("member", member.id, member.name, member.workspace_id)
