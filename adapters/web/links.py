"""The browser page's URL scheme, for every surface that links to it.

Chat messages put a "full view" link under each decision; they build it here so the scheme lives
in one place: `/decisions/<run_id>/<key>` for a decision, `/runs/<run_id>` for a run, `/inbox`
for everything resting on people, `/login/<token>` for a one-time sign-in link.
"""

from __future__ import annotations

from urllib.parse import quote


def _segment(value: str) -> str:
    return quote(value, safe="")


def decision_path(run_id: str, key: str) -> str:
    return f"/decisions/{_segment(run_id)}/{_segment(key)}"


def decision_url(base: str, run_id: str, key: str) -> str:
    """The decision's own page ("full view"): `base` is `server.public_url` (or host:port)."""
    return base.rstrip("/") + decision_path(run_id, key)


def run_path(run_id: str) -> str:
    return f"/runs/{_segment(run_id)}"


def run_url(base: str, run_id: str) -> str:
    return base.rstrip("/") + run_path(run_id)


def inbox_url(base: str) -> str:
    return base.rstrip("/") + "/inbox"


def login_url(base: str, token: str) -> str:
    """A one-time sign-in link (see bot/logins.py for how its token is kept)."""
    return base.rstrip("/") + "/login/" + _segment(token)
