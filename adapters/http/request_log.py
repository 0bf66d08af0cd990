"""What aiohttp's server logs about requests it could not even parse.

aiohttp answers a malformed request line, header or body encoding with a 400 and logs it with
`logger.exception` — an ERROR and a traceback each time, so anyone who can reach the port can
fill the log. `RequestLog` is the logger the app hands aiohttp's request handler
(`web.Application(handler_args={"logger": …})`, in `build_app`): those become one WARNING line
per `every` seconds, naming the kind of error and how many were seen; the message (which
quotes the bytes received, tokens and all) is left out. Everything else passes through to
`aiohttp.server` unchanged.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

SERVER_LOGGER = "aiohttp.server"
EVERY = 60.0  # seconds between two warnings


class RequestLog(logging.LoggerAdapter[logging.Logger]):
    """A logger for aiohttp's request handler that turns parse errors into rate-limited
    warnings."""

    def __init__(
        self,
        logger: logging.Logger | None = None,
        every: float = EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(logger or logging.getLogger(SERVER_LOGGER), {})
        self.every = every
        self._clock = clock
        self._lock = threading.Lock()
        self._next = float("-inf")  # when the next warning may be written
        self._held = 0  # malformed requests seen since the last warning
        self._kinds: set[str] = set()

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        return msg, kwargs

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        error = _error_of(exc_info)
        if isinstance(error, HttpProcessingError):
            self.malformed(error)
            return
        self.logger.exception(msg, *args, exc_info=exc_info, **kwargs)

    def reset(self) -> None:
        """Forget the window: the next malformed request is written at once."""
        with self._lock:
            self._next, self._held, self._kinds = float("-inf"), 0, set()

    def malformed(self, error: HttpProcessingError) -> None:
        """Count one malformed request; write a warning when the last one is old enough."""
        with self._lock:
            self._held += 1
            self._kinds.add(type(error).__name__)
            now = self._clock()
            if now < self._next:
                return
            count, kinds = self._held, sorted(self._kinds)
            self._held, self._kinds = 0, set()
            self._next = now + self.every
        self.logger.warning(
            "malformed HTTP requests refused with 400: %d (%s); at most one such line per %gs",
            count, ", ".join(kinds), self.every,
        )  # fmt: skip


def _error_of(exc_info: Any) -> BaseException | None:
    if isinstance(exc_info, BaseException):
        return exc_info
    if isinstance(exc_info, tuple) and len(exc_info) == 3:
        found = exc_info[1]
        return found if isinstance(found, BaseException) else None
    if exc_info:
        return sys.exc_info()[1]
    return None
