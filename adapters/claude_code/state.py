"""Which approvalbot run belongs to which Claude Code session, remembered on disk.

Layout, under `$XDG_STATE_HOME/approvalbot/claude-code/` (or
`~/.local/state/approvalbot/claude-code/`):

    <endpoint>/                 one directory per service URL + workspace,
                                e.g. `127.0.0.1_8787-default-1a2b3c4d`
        <session>.json          {"run_id", "session_id", "url", "workspace", "profile",
                                 "cwd", "created_at"}, replaced atomically (write + rename)
        <session>.lock          held (fcntl.flock) while a run is declared for the session

Claude Code runs the hooks of parallel tool calls in parallel: a reader needs no lock (a file
is either absent or complete), and the first calls of a session serialise on the lock and
re-read before declaring, so they declare one run between them.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

PRUNE_AFTER = 30 * 86400.0  # sessions untouched this long are forgotten (a new run if resumed)


def state_root() -> Path:
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "approvalbot" / "claude-code"


def _slug(text: str, limit: int = 60) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._")[:limit] or "x"


def endpoint_dir(root: Path, url: str, workspace: str) -> Path:
    readable = re.sub(r"^[a-z]+://", "", url).rstrip("/")
    check = zlib.crc32(f"{url}\n{workspace}".encode()) & 0xFFFFFFFF
    return root / f"{_slug(readable)}-{_slug(workspace)}-{check:08x}"


def session_name(session_id: str) -> str:
    slug = _slug(session_id, 100)
    if slug == session_id:
        return slug
    return f"{slug}-{zlib.crc32(session_id.encode()) & 0xFFFFFFFF:08x}"


class SessionRuns:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _file(self, session_id: str, suffix: str) -> Path:
        return self.directory / f"{session_name(session_id)}{suffix}"

    def lookup(self, session_id: str) -> str | None:
        """The remembered run of the session, or None."""
        try:
            with open(self._file(session_id, ".json"), encoding="utf-8") as file:
                record = json.load(file)
        except (OSError, ValueError):
            return None
        run_id = record.get("run_id") if isinstance(record, dict) else None
        return run_id if isinstance(run_id, str) and run_id else None

    def obtain(
        self,
        session_id: str,
        declare: Callable[[], str],
        record: dict[str, Any],
        stale: str | None = None,
    ) -> str:
        """The session's run: the remembered one unless it is `stale`, else a newly declared
        one (declared by exactly one of several parallel callers)."""
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        lock = os.open(self._file(session_id, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = self.lookup(session_id)
            if current is not None and current != stale:
                return current
            run_id = declare()
            self._write(session_id, {**record, "run_id": run_id, "session_id": session_id})
            self._prune()
            return run_id
        finally:
            os.close(lock)  # closing releases the lock

    def _write(self, session_id: str, record: dict[str, Any]) -> None:
        final = self._file(session_id, ".json")
        temporary = final.with_name(f".{final.name}.{os.getpid()}.tmp")
        data = json.dumps(record, ensure_ascii=False, sort_keys=True).encode()
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, final)

    def _prune(self) -> None:
        cutoff = time.time() - PRUNE_AFTER
        try:
            entries = list(os.scandir(self.directory))
        except OSError:
            return
        for entry in entries:
            try:
                if entry.name.endswith((".json", ".lock")) and entry.stat().st_mtime < cutoff:
                    os.unlink(entry.path)
            except OSError:
                continue
