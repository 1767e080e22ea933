"""Retrying transient cloud errors: jittered exponential backoff, bounded in attempts and time (tenacity)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay, wait_random_exponential

from .providers.tencent.errors import TransientError

T = TypeVar("T")


def retrying(fn: Callable[[], T], attempts: int = 6, max_seconds: float = 60.0, max_wait: float = 8.0) -> T:
    """``fn()`` retried on TransientError; the last error propagates when the bounds are reached."""
    for attempt in Retrying(
        retry=retry_if_exception_type(TransientError),
        stop=stop_after_attempt(attempts) | stop_after_delay(max_seconds),
        wait=wait_random_exponential(multiplier=0.25, max=max_wait),
        reraise=True,
    ):
        with attempt:
            return fn()
    raise AssertionError("unreachable: Retrying either returns or raises")
