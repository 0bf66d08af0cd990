"""Bearer tokens and resolution tokens. Only hashes are stored; comparisons are constant-time."""

from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_PREFIX = {"member": "abm_", "application": "aba_", "resolution": "abr_", "login": "abl_"}


def new_token(kind: str) -> str:
    return TOKEN_PREFIX[kind] + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


def resolution_token(secret: str, task_id: str) -> str:
    """Derived, not random, so an idempotent re-append returns the same token; the row keeps
    only its hash, and deriving needs the instance secret."""
    digest = hmac.new(secret.encode(), f"resolution:{task_id}".encode(), hashlib.sha256)
    return TOKEN_PREFIX["resolution"] + digest.hexdigest()[:43]
