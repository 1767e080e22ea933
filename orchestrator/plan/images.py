"""What a public image's operating system ships as python3: the agent runs on it, and needs 3.10 or later."""

from __future__ import annotations

import re

AGENT_PYTHON = (3, 10)  # pyproject.toml's requires-python

# Each release's own python3 (its distribution's default package): Ubuntu's, Debian's and the RHEL family's
# (CentOS, Rocky, AlmaLinux, TencentOS Server 2/3 and OpenCloudOS 8 are RHEL 7/8 rebuilds; TencentOS 4 and
# OpenCloudOS 9 ship 3.11).
_SHIPPED: tuple[tuple[str, tuple[int, int]], ...] = (
    (r"ubuntu\D+18\.04", (3, 6)), (r"ubuntu\D+20\.04", (3, 8)), (r"ubuntu\D+22\.04", (3, 10)),
    (r"ubuntu\D+24\.04", (3, 12)),
    (r"debian\D+10\b", (3, 7)), (r"debian\D+11\b", (3, 9)), (r"debian\D+12\b", (3, 11)),
    (r"centos\D+7\b", (3, 6)), (r"centos\D+8\b", (3, 6)), (r"(rocky|alma)\D+8\b", (3, 6)),
    (r"(rocky|alma)\D+9\b", (3, 9)),
    (r"tencentos\D+[23]\b", (3, 6)), (r"tencentos\D+4\b", (3, 11)),
    (r"opencloudos\D+8\b", (3, 6)), (r"opencloudos\D+9\b", (3, 11)),
)


def shipped_python(os_name: str) -> tuple[int, int] | None:
    """The python3 ``os_name``'s release ships; None when it is not one this table knows."""
    lowered = os_name.lower()
    return next((version for pattern, version in _SHIPPED if re.search(pattern, lowered)), None)


def too_old(os_name: str) -> str | None:
    """Why a public image of ``os_name`` cannot run the agent; None when it can (or when its OS is not known)."""
    version = shipped_python(os_name)
    if version is None or version >= AGENT_PYTHON:
        return None
    shipped, needed = ".".join(map(str, version)), ".".join(map(str, AGENT_PYTHON))
    return f"{os_name} ships Python {shipped}; the agent needs {needed} or later"
