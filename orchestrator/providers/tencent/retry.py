"""Retrying transient cloud errors: jittered exponential backoff, bounded in attempts and time (tenacity).

A controller acting on a job runs its actions ``guarded`` by the job's lease (lifecycle/lease.py): every attempt of
every retried call made meanwhile on that thread is preceded by the guard's check, which raises to stop it, and
so is the end of any other wait before a call (``waited``: an API token). A controller paused between two attempts
otherwise went on with the next one after another had taken the job over.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

from tenacity import Retrying, retry_if_exception_type, stop_after_attempt, stop_after_delay, wait_random_exponential

from .errors import TransientError

T = TypeVar("T")

Guard = Callable[[bool], None]  # raises to stop the call; True: a wait came before it (a retry's, a token's)
_guard: ContextVar[Guard | None] = ContextVar("retry_guard", default=None)


@contextmanager
def guarded(check: Guard) -> Iterator[None]:
    """Every attempt of every ``retrying`` call made inside (in this thread or task) calls ``check`` first."""
    token = _guard.set(check)
    try:
        yield
    finally:
        _guard.reset(token)


def waited() -> None:
    """A call of this thread waited (for an API token): the guard again, if any, before it goes."""
    check = _guard.get()
    if check is not None:
        check(True)


def retrying(fn: Callable[[], T], attempts: int = 6, max_seconds: float = 60.0, max_wait: float = 8.0) -> T:
    """``fn()`` retried on TransientError; the last error propagates when the bounds are reached, and the guard's
    error (see ``guarded``) at once."""
    check = _guard.get()
    for attempt in Retrying(
        retry=retry_if_exception_type(TransientError),
        stop=stop_after_attempt(attempts) | stop_after_delay(max_seconds),
        wait=wait_random_exponential(multiplier=0.25, max=max_wait),
        reraise=True,
    ):
        if check is not None:
            check(attempt.retry_state.attempt_number > 1)
        with attempt:
            return fn()
    raise AssertionError("unreachable: Retrying either returns or raises")
