"""Retrying COS calls that failed for a reason that may pass (network, 5xx, throttling, a checksum mismatch,
or keys that expired a moment before their successor arrived). Other errors are raised at once."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from orchestrator.providers.tencent import errors

log = logging.getLogger(__name__)
T = TypeVar("T")


def is_transient(exc: BaseException) -> bool:
    return isinstance(exc, (errors.TransientError, errors.ExpiredCredentialError))


def retrying(what: str, call: Callable[[], T], attempts: int = 5, first_delay: float = 1.0) -> T:
    delay = first_delay
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except errors.CloudError as exc:
            if attempt == attempts or not is_transient(exc):
                raise
            log.warning("%s failed (%s); retrying in %.0f s", what, exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 30.0)
    raise AssertionError("unreachable")
