"""Copying SQLite's WAL back into the database, on threads of its own (store/sqlite.py decides
when). A checkpoint copies pages and syncs the file: milliseconds that must not stall the event
loop."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor

# Background checkpoints yield the CPU to anything else that wants it (nice 19 on Linux).
BACKGROUND_NICE = 19


def _lower_priority() -> None:
    """Under load a background checkpoint would take turns for the CPU, milliseconds at a time,
    with the event loop or with the clients on the same machine, and every request in flight
    would wait that long. At nice 19 it runs on spare CPU; it still gets a little under full
    load, so the WAL keeps being copied back. (Linux sets this per thread.)"""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), BACKGROUND_NICE)
    except (AttributeError, OSError):  # not Linux: the thread keeps the process's priority
        pass


class Checkpointer:
    """One thread and one connection that run `PRAGMA wal_checkpoint`. The connection is kept:
    opening one per checkpoint cost more CPU than many a checkpoint."""

    def __init__(self, path: str, *, background: bool) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None  # used on the thread only
        self._thread = ThreadPoolExecutor(
            1,
            thread_name_prefix="sqlite-checkpoint",
            initializer=_lower_priority if background else None,
        )

    async def run(self, mode: str) -> int:
        """Checkpoint in `mode` (PASSIVE, RESTART, TRUNCATE); the WAL's size in pages."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, self._run, mode)

    def _run(self, mode: str) -> int:
        if self._conn is None:
            # A short busy timeout: a RESTART waits for readers, and writers wait for it.
            self._conn = sqlite3.connect(self.path, 0.2, check_same_thread=False)
        try:
            row = self._conn.execute(f"PRAGMA wal_checkpoint({mode})").fetchone()
        except Exception:
            self._close()  # the next checkpoint starts on a new connection
            raise
        return int(row[1])

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, self._close)
        self._thread.shutdown()
