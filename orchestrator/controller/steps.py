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
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, TypeVar

T = TypeVar("T")


class Urgency(IntEnum):
    """Lower runs first."""

    NOW = 0  # a launch or a recovery: someone waits for it, and a spot notice runs out
    SOON = 1  # booting, cancelling, tearing down
    ROUTINE = 2  # a look at a job that trains


@dataclass(eq=False)
class _Entry:
    step: Callable[[], Any]
    future: Future[Any]
    taken: bool = False  # a worker has it: an older place of it in the queue (before a hurry) is skipped


_Work = tuple[int, int, _Entry | None]
_STOP = len(Urgency)  # after every queued step: stop() lets them all run first


class StepPool:
    def __init__(self, workers: int, name: str) -> None:
        self._queue: queue.PriorityQueue[_Work] = queue.PriorityQueue()
        self._order = itertools.count()  # FIFO among equals; also keeps the entries out of the comparison
        self._queued: dict[Future[Any], _Entry] = {}
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._work, name=f"{name}_{i}") for i in range(workers)]
        for thread in self._threads:
            thread.start()

    def submit(self, urgency: Urgency, step: Callable[[], T]) -> Future[T]:
        future: Future[T] = Future()
        entry = _Entry(step, future)
        with self._lock:
            self._queued[future] = entry
        self._queue.put((urgency, next(self._order), entry))
        return future

    def hurry(self, future: Future[Any], urgency: Urgency) -> None:
        """A step still queued runs as soon as one of ``urgency`` would (a job whose spot instance is reclaimed
        while its routine look waits behind hundreds of teardowns); nothing happens to one that started."""
        with self._lock:
            entry = self._queued.get(future)
        if entry is not None:
            self._queue.put((urgency, next(self._order), entry))

    def stop(self) -> None:
        """Run what is queued, then end the threads."""
        for _ in self._threads:
            self._queue.put((_STOP, next(self._order), None))
        for thread in self._threads:
            thread.join()

    def _work(self) -> None:
        while True:
            _, _, entry = self._queue.get()
            if entry is None:
                return
            with self._lock:
                if entry.taken:
                    continue
                entry.taken = True
                del self._queued[entry.future]
            future = entry.future
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = entry.step()
            except BaseException as exc:  # the future carries it to the engine, as a ThreadPoolExecutor does
                future.set_exception(exc)
            else:
                future.set_result(result)
