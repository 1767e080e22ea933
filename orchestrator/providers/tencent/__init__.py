"""Tencent Cloud through the official SDKs: a handful of idempotent functions over typed records.

The rest of cvmjob holds a connection (``TencentSdk``) and passes it to this package's modules (compute, images,
storage, sts, billing); only ``_sdk`` touches the SDKs themselves. It is imported when ``TencentSdk`` is first
asked for: the package's leaves (its vocabulary, its errors) are read by processes that never call the cloud
(``cvmjob status``, the store), and the SDKs with requests cost them a tenth of a second of CPU at every start."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .keys import CredentialSource, RefreshingCredential, StaticCredential

if TYPE_CHECKING:
    from ._sdk import TencentSdk

__all__ = ["CredentialSource", "RefreshingCredential", "StaticCredential", "TencentSdk"]


def __getattr__(name: str) -> Any:
    if name != "TencentSdk":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ._sdk import TencentSdk

    globals()[name] = TencentSdk
    return TencentSdk
