"""Tencent Cloud through the official SDKs: a handful of idempotent functions over typed records.

The rest of cvmjob holds a connection (``TencentSdk``) and passes it to this package's modules (compute, images,
storage, sts, billing); only ``_sdk`` touches the SDKs themselves."""

from ._sdk import TencentSdk
from .keys import CredentialSource, RefreshingCredential, StaticCredential

__all__ = ["CredentialSource", "RefreshingCredential", "StaticCredential", "TencentSdk"]
