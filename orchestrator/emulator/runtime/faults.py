"""Every injected fault, deterministic (seeded), and the per-action rate limits: one place, one ``clear``.

API 3.0 rules match a service and action ("*" for any) and either fail the call with a code, add latency, or let
the call commit and then drop the response (the client sees a reset: the ClientToken case). COS rules match an
operation and key prefix and answer a 5xx, slow the body down, or reset the connection mid-body.
A rule fires ``count`` times (None: forever) with ``probability`` (drawn from the seeded generator).
Launch failures: the next ``count`` launches matching zone / instance type / charge type end LAUNCH_FAILED.
Image faults: the next captures "fail" (CREATEFAILED) or "hang" (CREATING until the faults are cleared).
Launch failures and hung captures are persisted with the cloud's state (they outlive a restart); the others are not.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..catalog import CHARGE_TYPES, INSTANCE_TYPES_BY_NAME, ZONES_BY_NAME
from ..errors import ApiError

API_KINDS = ("error", "latency", "drop_response")
COS_KINDS = ("error", "slow_body", "reset_body")
IMAGE_KINDS = ("fail", "hang")
DEFAULT_LAUNCH_FAILURE = (
    "ResourceInsufficient.SpecifiedInstanceType: the zone ran out of this instance type while creating it"
)

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
class LaunchFailure:
    count: int = 1
    message: str = ""
    zone: str | None = None
    instance_type: str | None = None
    charge_type: str | None = None

    def matches(self, zone: str, instance_type: str, charge_type: str) -> bool:
        return (
            self.count > 0
            and self.zone in (None, zone)
            and self.instance_type in (None, instance_type)
            and self.charge_type in (None, charge_type)
        )


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
    launch_failures: list[LaunchFailure] = field(default_factory=list)
    image_faults: list[str] = field(default_factory=list)  # one kind per capture still to fail or hang
    hung_images: set[str] = field(default_factory=set)  # captures held CREATING until ``clear``
    _rng: random.Random = field(init=False)
    _buckets: dict[str, _Bucket] = field(default_factory=dict)
    _next_id: int = 1
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def clear(self) -> None:
        """No more injected faults of any kind; hung captures finish. Rate limits stay."""
        with self._lock:
            self.api.clear()
            self.cos.clear()
            self.launch_failures.clear()
            self.image_faults.clear()
            self.hung_images.clear()

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

    def add_launch_failure(self, spec: dict[str, Any]) -> LaunchFailure:
        rule = LaunchFailure(
            count=int(spec.get("count", 1)),
            message=str(spec.get("message") or ""),
            zone=spec.get("zone"),
            instance_type=spec.get("instance_type"),
            charge_type=spec.get("charge_type"),
        )
        if rule.count < 1:
            raise ValueError("count must be at least 1")
        if rule.zone is not None and rule.zone not in ZONES_BY_NAME:
            raise ValueError(f"unknown zone {rule.zone!r}")
        if rule.instance_type is not None and rule.instance_type not in INSTANCE_TYPES_BY_NAME:
            raise ValueError(f"unknown instance type {rule.instance_type!r}")
        if rule.charge_type is not None and rule.charge_type not in CHARGE_TYPES:
            raise ValueError(f"charge type must be one of {CHARGE_TYPES}")
        with self._lock:
            self.launch_failures.append(rule)
        return rule

    def launch_failure(self, zone: str, instance_type: str, charge_type: str) -> str | None:
        """Why a launch of this shape fails, if a rule says it does (that rule then fires once less)."""
        with self._lock:
            rule = next((r for r in self.launch_failures if r.matches(zone, instance_type, charge_type)), None)
            if rule is None:
                return None
            rule.count -= 1
            self.launch_failures = [r for r in self.launch_failures if r.count > 0]
            return rule.message or DEFAULT_LAUNCH_FAILURE

    def add_image_faults(self, kind: str, count: int) -> int:
        """Queue ``count`` capture faults; returns how many are pending."""
        if kind not in IMAGE_KINDS:
            raise ValueError(f"image fault kind must be one of {IMAGE_KINDS}, not {kind!r}")
        with self._lock:
            self.image_faults += [kind] * count
            return len(self.image_faults)

    def capture_fault(self, image_id: str) -> str | None:
        """The fault of a capture starting now: "fail", "hang" (the image is held until ``clear``) or None."""
        with self._lock:
            kind = self.image_faults.pop(0) if self.image_faults else None
            if kind == "hang":
                self.hung_images.add(image_id)
            return kind

    def holds(self, image_id: str) -> bool:
        with self._lock:
            return image_id in self.hung_images

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
                "launch_failures": [asdict(r) for r in self.launch_failures],
                "image_faults": list(self.image_faults),
                "hung_images": sorted(self.hung_images),
            }

    def to_state(self) -> dict[str, Any]:
        with self._lock:
            return {
                "launch_failures": [asdict(r) for r in self.launch_failures],
                "hung_images": sorted(self.hung_images),
            }

    def restore(self, state: dict[str, Any]) -> None:
        with self._lock:
            self.launch_failures = [LaunchFailure(**r) for r in state.get("launch_failures", [])]
            self.hung_images = set(state.get("hung_images", []))

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
