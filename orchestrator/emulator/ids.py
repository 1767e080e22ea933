"""Resource ids in Tencent's format: a prefix and 8 lowercase letters or digits (e.g. ins-3g445roi)."""

from __future__ import annotations

import hashlib
import secrets
import string

_CHARS = string.ascii_lowercase + string.digits


def new_id(prefix: str) -> str:
    return prefix + "-" + "".join(secrets.choice(_CHARS) for _ in range(8))


def stable_id(prefix: str, *parts: str) -> str:
    """The same id for the same parts on every start (default VPC, subnets and security group)."""
    digest = hashlib.sha256("/".join(parts).encode()).digest()
    return prefix + "-" + "".join(_CHARS[b % len(_CHARS)] for b in digest[:8])
