"""The API budget: a token bucket per (service, action, region), filled at 80 % of Tencent's published rate limits
and split among the controllers sharing one store, so that a thousand jobs never earn a RequestLimitExceeded.

Tencent counts limits per API, access region and sub-account (shared/reference/landscape-wave2.md §5.1, from
https://cloud.tencent.com/document/api/213/15689): RunInstances, TerminateInstances, Start/Stop/RebootInstances
and InquiryPriceRunInstances 10/s, the Describe* calls of instances and offerings 40/s, 20/s otherwise. The
controllers of one store use one sub-account's keys, so each takes ``share`` of every bucket (1 / live replicas).
A call waits for its token rather than fail: waiting is what Tencent's own advice for RequestLimitExceeded says.
A thread may bound that wait (``patience``): a controller's step that is not urgent gives its thread back to the
jobs that are (a launch, a reclaimed job) rather than hold it while hundreds of teardowns queue for
TerminateInstances, and comes back when its turn is near (``OverBudget.ready_in``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

PUBLISHED_PER_SECOND: dict[tuple[str, str], float] = {
    ("cvm", "RunInstances"): 10,
    ("cvm", "TerminateInstances"): 10,
    ("cvm", "StartInstances"): 10,
    ("cvm", "StopInstances"): 10,
    ("cvm", "RebootInstances"): 10,
    ("cvm", "InquiryPriceRunInstances"): 10,
    ("cvm", "DescribeInstancesOperationLimit"): 10,
    ("cvm", "DescribeInstances"): 40,
    ("cvm", "DescribeInstancesStatus"): 40,
    ("cvm", "DescribeInstanceTypeConfigs"): 40,
    ("cvm", "DescribeZoneInstanceConfigInfos"): 40,
}
DEFAULT_PER_SECOND = 20.0
HEADROOM = 0.8  # of the published limit: other tools (the console, tccli, a CI job) share the sub-account


def rate_of(service: str, action: str) -> float:
    """This client's full rate for an action, before the split among controllers."""
    return PUBLISHED_PER_SECOND.get((service, action), DEFAULT_PER_SECOND) * HEADROOM


class OverBudget(Exception):
    """A call would have waited longer for its token than its thread's patience. Not a cloud error: nothing was
    sent, and retrying() must not retry it. ``ready_in``: seconds until a token is likely free for it (the
    callers deferred before it get theirs first)."""

    def __init__(self, service: str, action: str, ready_in: float) -> None:
        super().__init__(f"{service}:{action} is over this controller's API budget; ready in {ready_in:.1f} s")
        self.ready_in = ready_in


_patience = threading.local()


@contextmanager
def patience(seconds: float | None) -> Iterator[None]:
    """Calls of this thread inside wait at most ``seconds`` in all for a token (None: as long as it takes), else
    raise OverBudget."""
    before = getattr(_patience, "seconds", None)
    _patience.seconds = seconds
    try:
        yield
    finally:
        _patience.seconds = before


@dataclass
class _Bucket:
    free_at: float  # when the next call may go: calls are spaced 1/rate apart, each given its slot as it asks
    deferred_until: float = 0.0  # the last slot promised to a caller sent away (OverBudget.ready_in)


@dataclass
class ApiBudget:
    """Thread-safe: every job's calls of one controller draw from the same buckets.

    Each call is given the next free slot of its bucket when it asks, and sleeps until then (a virtual-time token
    bucket of one token): callers go in the order they asked. Threads that slept for a token and raced for it on
    waking served a backlog in random order, so that a launch could lose that race for seconds while later ones
    went first."""

    share: Callable[[], float] = lambda: 1.0  # this controller's part of each bucket: 1 / live controllers
    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _buckets: dict[tuple[str, str, str], _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    waited: float = 0.0  # seconds callers spent waiting for tokens, for benchmarks and logs

    def acquire(self, service: str, action: str, region: str) -> None:
        """Take the next slot of the bucket and wait for it (within this thread's ``patience``)."""
        limit = getattr(_patience, "seconds", None)
        while True:
            rate = self._rate(service, action)
            if rate > 0:
                break
            if limit is not None:  # no share of this action at all, for now
                raise OverBudget(service, action, 1.0)
            self.sleep(1.0)
        with self._lock:
            now = self.now()
            # A bucket holds one token: no window of a second ever holds more than the rate (a bucket of a
            # second's tokens let a burst after a quiet spell reach twice it).
            bucket = self._buckets.setdefault((service, action, region), _Bucket(now))
            slot = max(now, bucket.free_at)
            delay = slot - now
            if limit is not None and delay > limit:
                # The callers sent away come back one slot apart, after those already promised one, rather than
                # all at once.
                bucket.deferred_until = max(bucket.deferred_until, slot) + 1 / rate
                raise OverBudget(service, action, bucket.deferred_until - now)
            bucket.free_at = slot + 1 / rate
            self.waited += delay
        if delay > 0:
            self.sleep(delay)

    def _rate(self, service: str, action: str) -> float:
        """This controller's part of the action's rate."""
        return rate_of(service, action) * max(0.0, min(1.0, self.share()))
