"""Issue 21 (11): a run's title is written by an agent, so the page masks it wherever it shows
it (the inbox's group heading, the runs list, the run page's title and heading, breadcrumbs,
the Policy view), as chat messages do."""

from __future__ import annotations

from tests.conftest import World
from tests.web_helpers import append, browserless, declare, get_text, sign_in, site

TOKEN = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"


async def test_the_page_masks_a_secret_in_a_runs_title(world: World) -> None:
    run_id = await declare(world, title=f"deploy with {TOKEN}")
    task = await append(world, run_id, "bash", {"command": "make deploy"})
    async with site(world) as s, browserless() as client:
        await sign_in(client, s.url, world.tokens["alice"])
        for path in (
            "/inbox",
            "/runs",
            f"/runs/{run_id}",
            f"/decisions/{run_id}/{task.key}",
            f"/decisions/{run_id}/{task.key}/allow",
        ):
            status, html = await get_text(client, s.url + path)
            assert status == 200, path
            assert TOKEN not in html and TOKEN[4:20] not in html, path
            assert "deploy with ghp_****" in html, path
