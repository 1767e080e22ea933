"""The account's COS buckets (GET Service): where a job of another store may keep its state (`cvmjob gc` looks in
each before it takes the job for gone)."""

from __future__ import annotations

from typing import Any

from ._sdk import TencentSdk

PAGE = 2000  # GET Service's largest max-keys


def regions(sdk: TencentSdk) -> dict[str, str]:
    """The account's buckets (``<name>-<appid>``) and the region of each; GET Service lists every region's, a page
    at a time."""
    found: dict[str, str] = {}
    marker = ""
    while True:
        listed: dict[str, Any] = sdk.cos_call("list_buckets", Marker=marker, MaxKeys=PAGE)
        page = (listed.get("Buckets") or {}).get("Bucket") or []
        found.update({b["Name"]: b.get("Location", "") for b in page})
        if listed.get("IsTruncated") != "true" or not page:
            return found
        marker = listed.get("NextMarker") or page[-1]["Name"]


def in_region(sdk: TencentSdk) -> list[str]:
    """The names of the account's buckets in the SDK's region."""
    return [name for name, region in regions(sdk).items() if region == sdk.region]
