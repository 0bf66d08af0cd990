"""Copying SQLite's WAL back into the database, on a thread of its own (store/sqlite.py decides
when). A checkpoint copies pages and syncs the file: milliseconds that must not stall the event
loop."""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import ThreadPoolExecutor


class Checkpointer:
    """One thread and one connection that run `PRAGMA wal_checkpoint`, one at a time. The
    connection is kept: opening one per checkpoint cost more CPU than many a checkpoint.

    The thread keeps normal priority. At nice 19 it measured a slightly lower p99, but when
    other processes kept the CPU busy it was starved, and the WAL, whose size only a finished
    checkpoint reports, grew past its bounds."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None  # used on the thread only
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="sqlite-checkpoint")

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
