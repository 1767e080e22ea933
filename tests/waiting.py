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


def holds_for(what: str, predicate: Callable[[], object], seconds: float, poll: float = 0.2) -> None:
    """``predicate()`` stays truthy for ``seconds``, checked every ``poll``: AssertionError naming ``what`` at the
    first look it does not hold (a sleep and one look would miss a moment in between)."""
    deadline = time.monotonic() + seconds
    while True:
        if not predicate():
            raise AssertionError(f"{what} stopped holding {seconds - (deadline - time.monotonic()):.1f} s in")
        if time.monotonic() > deadline:
            return
        time.sleep(poll)


def settled(what: str, value: Callable[[], T], quiet: float, timeout: float, poll: float = 0.1) -> T:
    """``value()`` once it has not changed for ``quiet`` seconds (e.g. a call log after the calls in flight have
    landed); AssertionError naming ``what`` if it still changes after ``timeout``."""
    deadline = time.monotonic() + timeout
    last, since = value(), time.monotonic()
    while True:
        time.sleep(poll)
        now = value()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return now
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} still changing after {timeout:.0f} s")
