"""Polling until something holds, for tests that watch real processes and servers."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_until(what: str, predicate: Callable[[], T | None], timeout: float, poll: float = 0.2) -> T:
    """The first truthy value of ``predicate()``; AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)
