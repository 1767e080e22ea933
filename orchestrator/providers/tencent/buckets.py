"""The account's COS buckets (GET Service): where a job of another store may keep its state (`cvmjob gc` looks in
each before it takes the job for gone)."""

from __future__ import annotations

from typing import Any

from ._sdk import TencentSdk

PAGE = 2000  # GET Service's largest max-keys


def in_region(sdk: TencentSdk) -> list[str]:
    """The names (``<name>-<appid>``) of the account's buckets in the SDK's region; GET Service lists every
    region's, a page at a time."""
    names: list[str] = []
    marker = ""
    while True:
        listed: dict[str, Any] = sdk.cos_call("list_buckets", Marker=marker, MaxKeys=PAGE)
        page = (listed.get("Buckets") or {}).get("Bucket") or []
        names += [b["Name"] for b in page if b.get("Location") == sdk.region]
        if listed.get("IsTruncated") != "true" or not page:
            return names
        marker = listed.get("NextMarker") or page[-1]["Name"]
