"""Storage faults: a full disk, a read-only database, a file that cannot be written, a
PostgreSQL server that cannot be reached.

The store turns each into the core's `StorageUnavailable` (503 `storage_unavailable`, with its
cause) at its boundary, `SqlStore.write()`/`read()` and the SQLite writer, so the API, the CLI,
the page and the chats show the same code and the same plain detail. What counts:

- `disk_full`: SQLite's SQLITE_FULL ("database or disk is full": the disk, or
  `max_page_count`); PostgreSQL's 53100 `disk_full`.
- `read_only`: SQLite's SQLITE_READONLY, or an I/O error on a file system mounted read-only or
  on a file of the database that cannot be written (immutable, permissions); PostgreSQL's
  25006 `read_only_sql_transaction` (`default_transaction_read_only`, a hot standby).
- `io_error`: any other SQLITE_IOERR or SQLITE_CANTOPEN (SQLite only).
- `unreachable` (PostgreSQL only): no connection (refused, timed out, dropped: class 08,
  57P01-57P03), or none given for too many connections (53300).

Anything else (a constraint, a bug, a lock held too long) stays what it was: a refusal of its
own or a 500. `StorageHealth` keeps the fault the last write ended with, for `/readyz`, and says
it in the log: one line when writes start failing (again at most once a minute while they do,
with how many were refused) and one when a write succeeds again; never the SQL, its
parameters or a traceback.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time

import sqlalchemy as sa

from bot.errors import StorageUnavailable

log = logging.getLogger(__name__)

DISK_FULL = "disk_full"
READ_ONLY = "read_only"
IO_ERROR = "io_error"
UNREACHABLE = "unreachable"

# What happened, as the log and every surface say it.
PLAIN = {
    DISK_FULL: "the database's disk is full",
    READ_ONLY: "the database is read-only",
    IO_ERROR: "the database file cannot be written (an I/O error)",
    UNREACHABLE: "the database cannot be reached or refuses connections",
}
_NEXT = {
    DISK_FULL: "try again once it has room",
    READ_ONLY: "try again once it is writable",
    IO_ERROR: "try again once the disk is repaired",
    UNREACHABLE: "try again shortly",
}

# SQLite's primary result codes (the low byte of an extended one).
_SQLITE_READONLY = 8
_SQLITE_IOERR = 10
_SQLITE_FULL = 13
_SQLITE_CANTOPEN = 14
# PostgreSQL SQLSTATEs: a session or the server going away, refusing connections.
_PG_UNREACHABLE = ("57P01", "57P02", "57P03", "53300")
# Free space below which an I/O error on SQLite's file is taken for a full disk.
_LOW_SPACE = 64 * 1024


def storage_unavailable(cause: str) -> StorageUnavailable:
    return StorageUnavailable(cause, f"{PLAIN[cause]}: nothing was saved; {_NEXT[cause]}")


def fault_of(
    error: BaseException, *, postgres: bool, path: str | None = None
) -> StorageUnavailable | None:
    """The storage fault `error` is, or None when it is none (it is then raised as it is).
    `path`: the SQLite file, looked at to tell a read-only file or a full disk behind an I/O
    error."""
    if isinstance(error, StorageUnavailable):
        return error
    cause = _cause(error, postgres, path)
    return None if cause is None else storage_unavailable(cause)


def _cause(error: BaseException, postgres: bool, path: str | None) -> str | None:
    original: BaseException = error
    if isinstance(error, sa.exc.DBAPIError) and isinstance(error.orig, BaseException):
        original = error.orig
    if isinstance(original, sqlite3.Error):
        code = getattr(original, "sqlite_errorcode", None)
        if not isinstance(code, int):
            return None
        primary = code & 0xFF
        if primary == _SQLITE_FULL:
            return DISK_FULL
        if primary == _SQLITE_READONLY:
            return READ_ONLY
        if primary in (_SQLITE_IOERR, _SQLITE_CANTOPEN):
            return diagnose(path)
        return None
    if not postgres:
        return None
    state = getattr(original, "sqlstate", None)
    if isinstance(state, str):
        if state == "53100":
            return DISK_FULL
        if state == "25006":
            return READ_ONLY
        if state.startswith("08") or state in _PG_UNREACHABLE:
            return UNREACHABLE
        return None
    if isinstance(error, sa.exc.DBAPIError) and error.connection_invalidated:
        return UNREACHABLE
    if isinstance(original, OSError):  # refused, unresolvable, timed out (TimeoutError)
        return UNREACHABLE
    return None


def diagnose(path: str | None) -> str:
    """Why SQLite could not write its file, from the file system itself: mounted read-only, a
    file of the database that cannot be written (immutable, permissions), no room left."""
    if not path:
        return IO_ERROR
    folder = os.path.dirname(os.path.abspath(path))
    try:
        space = os.statvfs(folder)
    except OSError:
        return IO_ERROR
    if space.f_flag & os.ST_RDONLY:
        return READ_ONLY
    for name in (path, f"{path}-wal", f"{path}-shm"):
        if os.path.exists(name) and not os.access(name, os.W_OK):
            return READ_ONLY
    if space.f_bavail * space.f_frsize < _LOW_SPACE:
        return DISK_FULL
    return IO_ERROR


class StorageHealth:
    """The fault the store's last write ended with (None once one succeeds), and the log."""

    repeat_seconds = 60.0  # while writes keep failing, one line a minute at most

    def __init__(self) -> None:
        self.fault: StorageUnavailable | None = None
        self._said: tuple[str, float] | None = None  # (cause, monotonic time) of the last line
        self._refused = 0  # since the last line
        self._told = False  # this fault's line was logged: its end is logged too

    def refused(self, fault: StorageUnavailable) -> StorageUnavailable:
        """An operation failed with `fault`: logged if it is news, returned."""
        now = time.monotonic()
        self._refused += 1
        said = self._said
        if said is None or said[0] != fault.cause or now - said[1] >= self.repeat_seconds:
            if self.fault is None or said is None or said[0] != fault.cause:
                log.error(
                    "storage unavailable: %s; writes are refused with 503 storage_unavailable"
                    " (cause %s) until one succeeds",
                    PLAIN[fault.cause], fault.cause,
                )  # fmt: skip
            else:
                log.error(
                    "storage still unavailable: %s (cause %s); %d operations refused in %.0f s",
                    PLAIN[fault.cause], fault.cause, self._refused, now - said[1],
                )  # fmt: skip
            self._said = (fault.cause, now)
            self._refused = 0
            self._told = True
        self.fault = fault
        return fault

    def wrote(self) -> None:
        """A write succeeded: the fault, if any, is over."""
        fault, self.fault = self.fault, None
        if fault is not None and self._told:
            log.warning(
                "storage available again: a write succeeded (it was: %s)", PLAIN[fault.cause]
            )
            self._told = False
