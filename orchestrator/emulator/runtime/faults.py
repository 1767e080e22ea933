"""Deterministic fault injection (seeded) and per-action rate limits.

API 3.0 rules match a service and action ("*" for any) and either fail the call with a code, add latency, or let
the call commit and then drop the response (the client sees a reset: the ClientToken case). COS rules match an
operation and key prefix and answer a 5xx, slow the body down, or reset the connection mid-body.
A rule fires ``count`` times (None: forever) with ``probability`` (drawn from the seeded generator).
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import ApiError

API_KINDS = ("error", "latency", "drop_response")
COS_KINDS = ("error", "slow_body", "reset_body")

# Defaults from shared/reference/tencent-cloud-api.md §4.3: 20/s per action, creation and termination 10/s,
# reads 40/s. Real limits are per account and action; so are these.
DEFAULT_RATE_LIMITS: dict[str, float] = {
    "*": 20.0,
    "cvm:RunInstances": 10.0,
    "cvm:TerminateInstances": 10.0,
    "cvm:CreateImage": 10.0,
    "cvm:DeleteImages": 10.0,
    "cvm:DescribeInstances": 40.0,
    "cvm:DescribeInstancesStatus": 40.0,
    "cvm:DescribeImages": 40.0,
}


@dataclass
class ApiFault:
    kind: str
    service: str = "*"
    action: str = "*"
    code: str = "InternalError"
    message: str = "Injected fault."
    seconds: float = 0.0
    count: int | None = 1
    probability: float = 1.0
    id: int = 0

    def matches(self, service: str, action: str) -> bool:
        return self.service in ("*", service) and self.action in ("*", action)


@dataclass
class CosFault:
    kind: str
    operation: str = "*"  # GetObject, PutObject, UploadPart, HeadObject, ... or "*"
    bucket: str = "*"
    key_prefix: str = ""
    status: int = 503
    code: str = "ServiceUnavailable"
    message: str = "Injected fault."
    bytes_per_second: float = 1_000_000.0  # slow_body
    after_bytes: int = 0  # reset_body: bytes sent before the reset
    count: int | None = 1
    probability: float = 1.0
    id: int = 0

    def matches(self, operation: str, bucket: str, key: str) -> bool:
        return self.operation in ("*", operation) and self.bucket in ("*", bucket) and key.startswith(self.key_prefix)


@dataclass
class _Bucket:
    rate: float
    tokens: float
    stamp: float


@dataclass
class Faults:
    seed: int = 0
    rate_limits: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_RATE_LIMITS))
    api: list[ApiFault] = field(default_factory=list)
    cos: list[CosFault] = field(default_factory=list)
    _rng: random.Random = field(init=False)
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _next_id: int = 1
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def reset(self, seed: int | None = None) -> None:
        with self._lock:
            if seed is not None:
                self.seed = seed
            self._rng = random.Random(self.seed)
            self.api.clear()
            self.cos.clear()
            self._buckets.clear()
            self.rate_limits = dict(DEFAULT_RATE_LIMITS)

    def add_api(self, spec: dict[str, Any]) -> ApiFault:
        fault = ApiFault(**spec)
        if fault.kind not in API_KINDS:
            raise ValueError(f"API fault kind must be one of {API_KINDS}, not {fault.kind!r}")
        with self._lock:
            fault.id = self._next_id
            self._next_id += 1
            self.api.append(fault)
        return fault

    def add_cos(self, spec: dict[str, Any]) -> CosFault:
        fault = CosFault(**spec)
        if fault.kind not in COS_KINDS:
            raise ValueError(f"COS fault kind must be one of {COS_KINDS}, not {fault.kind!r}")
        with self._lock:
            fault.id = self._next_id
            self._next_id += 1
            self.cos.append(fault)
        return fault

    def set_rate_limit(self, key: str, per_second: float | None) -> None:
        with self._lock:
            if per_second is None:
                self.rate_limits.pop(key, None)
            else:
                self.rate_limits[key] = per_second
            self._buckets.pop(key, None)

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {
                "seed": self.seed,
                "rate_limits": dict(self.rate_limits),
                "api": [asdict(f) for f in self.api],
                "cos": [asdict(f) for f in self.cos],
            }

    def _fire(self, rule: ApiFault | CosFault) -> bool:
        if rule.count is not None and rule.count <= 0:
            return False
        if rule.probability < 1.0 and self._rng.random() >= rule.probability:
            return False
        if rule.count is not None:
            rule.count -= 1
        return True

    def before_api_call(self, service: str, action: str) -> tuple[bool, float]:
        """Raise the injected or throttling error, or return (drop the response?, latency seconds)."""
        with self._lock:
            self._throttle(service, action)
            drop, delay = False, 0.0
            for rule in self.api:
                if not rule.matches(service, action) or not self._fire(rule):
                    continue
                if rule.kind == "error":
                    raise ApiError(rule.code, rule.message)
                if rule.kind == "latency":
                    delay += rule.seconds
                else:
                    drop = True
            self.api = [r for r in self.api if r.count is None or r.count > 0]
            return drop, delay

    def _throttle(self, service: str, action: str) -> None:
        key = f"{service}:{action}"
        limit_key = key if key in self.rate_limits else "*"
        rate = self.rate_limits.get(limit_key)
        if not rate:
            return
        bucket_key = key  # each action has its own bucket, even under the shared default
        now = time.monotonic()
        bucket = self._buckets.get(bucket_key)
        if bucket is None or bucket.rate != rate:
            bucket = self._buckets[bucket_key] = _Bucket(rate, rate, now)
        bucket.tokens = min(rate, bucket.tokens + (now - bucket.stamp) * rate)
        bucket.stamp = now
        if bucket.tokens < 1.0:
            raise ApiError("RequestLimitExceeded", f"Requests of {action} exceed the limit of {rate:g} per second.")
        bucket.tokens -= 1.0

    def cos_fault(self, operation: str, bucket: str, key: str) -> CosFault | None:
        with self._lock:
            for rule in self.cos:
                if rule.matches(operation, bucket, key) and self._fire(rule):
                    self.cos = [r for r in self.cos if r.count is None or r.count > 0]
                    return rule
            return None
