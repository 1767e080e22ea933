"""COS access for the agent: credentials that renew themselves, one SDK, one ObjectStore per bucket, and the
requests in flight for large files sized to the instance's network.

Credentials (AgentConfig.cos.mode):
- "sts": the short-lived keys in agent.json; when they near expiry the agent fetches their successor from
  ``credentials_url`` (a presigned GET of attempts/<n>/credentials.json, which the controller rewrites).
- "role": the CVM role's keys from the metadata service (``cam/security-credentials/<role>``), fetched again
  before ``ExpiredTime``.
Keys are never logged, and never passed on to the training's environment.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from orchestrator.contract import AgentConfig, CredentialsDoc, RegistryToken, TemporaryKeys
from orchestrator.providers.tencent import CredentialSource, RefreshingCredential, StaticCredential, TencentSdk
from orchestrator.providers.tencent.storage import ObjectStore

from .metadata import Metadata

log = logging.getLogger(__name__)

# While the controller has not rotated yet, ask again at most this often. Short: after the cloud rejected the keys
# (expired early), the agent is silent until the controller's new ones arrive, and silence for
# heartbeat_stale_after loses the attempt.
_REFETCH_SECONDS = 5.0

# About what one connection to the object store carries: the AWS Common Runtime's S3 client (aws-c-s3,
# s3_client.c) plans 4 Gbps for every 10 connections to reach a throughput target. Enough ranges stay in flight to
# fill the instance's link: at least 8 (also when the catalog gives no bandwidth), at most 32: each is a thread
# and a connection, and all must fit in the SDK's keep-alive pool of 64 (a range or a part streams through a MiB
# of memory at a time).
_GBPS_PER_CONNECTION = 0.4
_RANGES_MIN, _RANGES_MAX = 8, 32


def _static(keys: TemporaryKeys) -> tuple[StaticCredential, float]:
    return StaticCredential(keys.secret_id, keys.secret_key, keys.token), float(keys.expires_at)


class StsKeys:
    """The fetch function of a RefreshingCredential in "sts" mode: agent.json's keys first, then
    credentials.json through the presigned URL. A failed fetch keeps the current keys (the COS call then fails
    and is retried), so a controller that is briefly late never kills the agent."""

    def __init__(self, initial: TemporaryKeys, url: str | None) -> None:
        self._current = _static(initial)
        self._url = url
        self._fetched_at: float | None = None
        self._lock = threading.Lock()  # the heartbeat, log and upload threads may all find the keys stale

    def __call__(self) -> tuple[StaticCredential, float]:
        with self._lock:
            return self._next()

    def _next(self) -> tuple[StaticCredential, float]:
        if self._fetched_at is None:
            self._fetched_at = 0.0
            return self._current
        if self._url is None or time.monotonic() - self._fetched_at < _REFETCH_SECONDS:
            return self._current
        self._fetched_at = time.monotonic()
        doc = fetch_credentials(self._url)
        if doc is not None and doc.keys is not None:
            self._current = _static(doc.keys)
        return self._current


def fetch_credentials(url: str) -> CredentialsDoc | None:
    """The controller's latest credentials.json; None (said in the log, without the URL: it is a secret) when it
    cannot be read, for the caller to keep what it has."""
    try:
        with urllib.request.urlopen(url, timeout=15) as resp:  # honours HTTP_PROXY (the emulator)
            return CredentialsDoc.model_validate_json(resp.read())
    except Exception as exc:  # any failure
        if isinstance(exc, urllib.error.HTTPError):
            exc.close()
        log.warning("could not fetch new credentials (%s); keeping the current ones", type(exc).__name__)
        return None


# A registry token closer than this to its end is replaced before a login: a pull may outlast what is left.
_TOKEN_MARGIN_SECONDS = 600.0


def registry_token(cfg: AgentConfig, now: float) -> RegistryToken | None:
    """The login to container.login.tcr's registry: agent.json's token while it lasts, else the controller's
    latest (it rotates it with the keys); None when the job logs in otherwise."""
    token = cfg.registry
    if token is None or token.expires_at - now > _TOKEN_MARGIN_SECONDS or cfg.credentials_url is None:
        return token
    doc = fetch_credentials(cfg.credentials_url)
    return doc.registry if doc is not None and doc.registry is not None else token


class RoleKeys:
    """The fetch function of a RefreshingCredential in "role" mode: the CVM role's keys from the metadata."""

    def __init__(self, metadata: Metadata, role_name: str | None) -> None:
        self._metadata = metadata
        self._role = role_name

    def __call__(self) -> tuple[StaticCredential, float]:
        if self._role is None:
            listing = self._metadata.get("cam/security-credentials/") or ""
            self._role = listing.split()[0] if listing.split() else None
            if self._role is None:
                raise RuntimeError("this instance has no CAM role (metadata cam/security-credentials/ is empty)")
        text = self._metadata.get(f"cam/security-credentials/{self._role}")
        if text is None:
            raise RuntimeError(f"the metadata service has no credentials for the CAM role {self._role!r}")
        doc = json.loads(text)
        cred = StaticCredential(doc["TmpSecretId"], doc["TmpSecretKey"], doc["Token"])
        return cred, float(doc["ExpiredTime"])


def credential_for(cfg: AgentConfig, metadata: Metadata) -> CredentialSource:
    if cfg.cos.mode == "role":
        return RefreshingCredential(RoleKeys(metadata, cfg.cos.role_name))
    if cfg.keys is None:
        raise ValueError("agent.json: cos.mode is 'sts' but no keys were given")
    return RefreshingCredential(StsKeys(cfg.keys, cfg.credentials_url))


def bypass_proxy_for(endpoint: str) -> None:
    """On the emulator the instance's HTTP_PROXY is for metadata and presigned URLs; the SDKs must reach the
    COS endpoint directly, and the Tencent SDK matches NO_PROXY against "host:port" as a substring
    (shared/reference/client-recipes.md §2.6), so both forms go in."""
    host = endpoint.rsplit(":", 1)[0]
    for name in ("NO_PROXY", "no_proxy"):
        entries = [e for e in os.environ.get(name, "").split(",") if e]
        os.environ[name] = ",".join([*entries, *(e for e in (host, endpoint) if e not in entries)])


def ranges_in_flight(bandwidth_gbps: float | None) -> int:
    """Range GETs and part PUTs of large files to keep in flight, all files together, on a link of
    ``bandwidth_gbps`` (None: not known)."""
    if bandwidth_gbps is None:
        return _RANGES_MIN
    return max(_RANGES_MIN, min(_RANGES_MAX, math.ceil(bandwidth_gbps / _GBPS_PER_CONNECTION)))


class Stores:
    """ObjectStores over one SDK, by bucket (the state bucket, and data/checkpoint/output buckets). Their large
    transfers share ``ranges`` requests in flight: the data sync's and the checkpoint uploads' together never keep
    more than the link wants."""

    def __init__(self, sdk: TencentSdk, ranges: int = _RANGES_MIN, regions: dict[str, str] | None = None) -> None:
        self.sdk = sdk
        self.ranges = ranges
        self._regions = regions or {}  # buckets of other regions (network.allow_cross_region), and theirs
        self._pool = ThreadPoolExecutor(max_workers=ranges, thread_name_prefix="cos-range")
        self._stores: dict[str, ObjectStore] = {}
        self._lock = threading.Lock()

    def bucket(self, name: str) -> ObjectStore:
        with self._lock:
            if name not in self._stores:
                sdk = self.sdk.for_region(self._regions.get(name, self.sdk.region))
                self._stores[name] = ObjectStore(sdk, name, ranges=self._pool)
            return self._stores[name]


def connect(cfg: AgentConfig, metadata: Metadata) -> Stores:
    if cfg.cos.endpoint is not None:
        bypass_proxy_for(cfg.cos.endpoint)
    sdk = TencentSdk(credential_for(cfg, metadata), cfg.cos.region, endpoint=cfg.cos.endpoint, appid=cfg.cos.appid)
    ranges = ranges_in_flight(cfg.bandwidth_gbps)
    network = f"{cfg.bandwidth_gbps:g} Gbps" if cfg.bandwidth_gbps is not None else "an unknown network"
    log.info("large files: %d ranges in flight (%s)", ranges, network)
    return Stores(sdk, ranges, cfg.cos.bucket_regions)
