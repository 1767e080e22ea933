"""The engine's step threads: the most urgent step first, in the order they came among equals.

A thread pool's FIFO queue made a job just submitted, or one whose spot instance is being reclaimed, wait behind
every training job's routine look queued in the same round: a thousand of them took seconds to drain.
"""

from __future__ import annotations

import itertools
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from enum import IntEnum
from typing import Any, TypeVar

T = TypeVar("T")


class Urgency(IntEnum):
    """Lower runs first."""

    NOW = 0  # a launch or a recovery: someone waits for it, and a spot notice runs out
    SOON = 1  # booting, cancelling, tearing down
    ROUTINE = 2  # a look at a job that trains


_Work = tuple[int, int, Callable[[], Any] | None, "Future[Any] | None"]
_STOP = len(Urgency)  # after every queued step: stop() lets them all run first


class StepPool:
    def __init__(self, workers: int, name: str) -> None:
        self._queue: queue.PriorityQueue[_Work] = queue.PriorityQueue()
        self._order = itertools.count()  # FIFO among equals; also keeps the callables out of the comparison
        self._threads = [threading.Thread(target=self._work, name=f"{name}_{i}") for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, urgency: Urgency, step: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        self._queue.put((urgency, next(self._order), step, future))
        return future

    def stop(self) -> None:
        """Run what is queued, then end the threads."""
        for _ in self._threads:
            self._queue.put((_STOP, next(self._order), None, None))
        for thread in self._threads:
            thread.join()

    def _work(self) -> None:
        while True:
            _, _, step, future = self._queue.get()
            if step is None or future is None:
                return
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = step()
            except BaseException as exc:  # the future carries it to the engine, as a ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)
