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
    tokens: float
    at: float
    deferred_until: float = 0.0  # the last slot promised to a caller sent away (OverBudget.ready_in)


@dataclass
class ApiBudget:
    """Thread-safe: every job's calls of one controller draw from the same buckets."""

    share: Callable[[], float] = lambda: 1.0  # this controller's part of each bucket: 1 / live controllers
    now: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _buckets: dict[tuple[str, str, str], _Bucket] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    waited: float = 0.0  # seconds callers spent waiting for tokens, for benchmarks and logs

    def acquire(self, service: str, action: str, region: str) -> None:
        """Take one token, waiting for it when the bucket is empty (within this thread's ``patience``)."""
        limit = getattr(_patience, "seconds", None)
        give_up_at = None if limit is None else self.now() + limit
        while True:
            delay = self._take(service, action, region)
            if delay <= 0:
                return
            if give_up_at is not None and self.now() + delay > give_up_at:
                raise OverBudget(service, action, self._defer(service, action, region, delay))
            self.sleep(delay)
            with self._lock:
                self.waited += delay

    def _defer(self, service: str, action: str, region: str, delay: float) -> float:
        """The seconds after which a caller sent away now should come back: one slot (1/rate) after the callers
        sent away before it, so that they return spread at the rate rather than all at once."""
        rate = max(self._rate(service, action), 1e-3)  # a share of 0 sends callers away for good, nearly
        with self._lock:
            now = self.now()
            bucket = self._buckets[(service, action, region)]
            bucket.deferred_until = max(bucket.deferred_until, now + delay) + 1 / rate
            return bucket.deferred_until - now

    def _rate(self, service: str, action: str) -> float:
        """This controller's part of the action's rate."""
        return rate_of(service, action) * max(0.0, min(1.0, self.share()))

    def _take(self, service: str, action: str, region: str) -> float:
        """0 when a token was taken, else the seconds until one will be there."""
        rate = self._rate(service, action)
        if rate <= 0:
            return 1.0
        with self._lock:
            now = self.now()
            # A bucket holds one token: calls are spaced 1/rate apart, so no window of a second ever holds more
            # than the rate (a bucket of a second's tokens let a burst after a quiet spell reach twice it).
            bucket = self._buckets.setdefault((service, action, region), _Bucket(1.0, now))
            bucket.tokens = min(1.0, bucket.tokens + (now - bucket.at) * rate)
            bucket.at = now
            if bucket.tokens >= 1:
                bucket.tokens -= 1
                return 0.0
            return (1 - bucket.tokens) / rate
