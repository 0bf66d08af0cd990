"""Issue 21 (15): an inbox card is clipped by characters as well as lines: three parked
one-line commands of a megabyte each make a small inbox; the decision page keeps the whole."""

from __future__ import annotations

from tests.conftest import World
from tests.web_helpers import append, browserless, declare, get_text, sign_in, site


async def test_megabyte_one_line_commands_make_a_small_inbox(world: World) -> None:
    run_id = await declare(world)
    keys = []
    for n in range(3):
        command = f"echo {n} " + "x" * 1_000_000 + f" tail-{n}"
        keys.append((await append(world, run_id, "bash", {"command": command})).key)
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        status, inbox = await get_text(client, f"{s.url}/inbox")
        assert status == 200
        assert len(inbox.encode()) < 200_000, len(inbox)
        assert "more characters" in inbox and "tail-2" in inbox  # its head and its tail
        status, decision = await get_text(client, f"{s.url}/decisions/{run_id}/{keys[0]}")
        assert status == 200 and "x" * 1_000_000 in decision  # the whole call stays here
