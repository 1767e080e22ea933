"""Tencent Cloud through the official SDKs: a handful of idempotent functions over typed records."""
