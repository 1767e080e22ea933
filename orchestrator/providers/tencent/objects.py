"""What a COS object is to this client, on every transfer path: its listing or header facts, and the checks
that make a transfer trustworthy (the CRC-64 COS reports, a temporary name beside the destination until the bytes
are verified)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import errors

Progress = Callable[[int], None]


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str
    crc64: int | None = None
    last_modified: str = ""


def info_from_headers(key: str, headers: dict[str, Any]) -> ObjectInfo:
    lowered = {k.lower(): v for k, v in headers.items()}
    crc = lowered.get("x-cos-hash-crc64ecma")
    return ObjectInfo(
        key=key,
        size=int(lowered.get("content-length") or 0),
        etag=str(lowered.get("etag") or "").strip('"'),
        crc64=int(crc) if crc else None,
        last_modified=str(lowered.get("last-modified") or ""),
    )


class ChecksumMismatch(errors.TransientError):
    """The bytes that arrived are not the bytes COS holds: transient, the transfer is retried."""


def part_path(dest: Path) -> Path:
    return dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}.part")


def verify(key: str, remote: int | None, local: int) -> None:
    if remote is not None and remote != local:
        raise ChecksumMismatch("ChecksumMismatch", f"{key}: CRC64 {local} here, {remote} in COS")
