"""Offset/Limit paging, the way every paged Describe* of API 3.0 takes it.

A page shorter than the limit is the last one; so is the page that reaches the stated total (a list exactly a
multiple of the page long ends without asking for an empty page after it). The total is read from each answer,
and a missing total counts as reached: an answer that does not say how much there is ends the listing rather
than keeping it going on a guess.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

PAGE = 100


class Caller(Protocol):
    """What paging needs of a connection (``TencentSdk`` is one)."""

    def call(self, service: str, action: str, params: dict[str, Any]) -> dict[str, Any]: ...


def pages(
    sdk: Caller, service: str, action: str, params: dict[str, Any], items: str, total: str = "TotalCount"
) -> Iterator[dict[str, Any]]:
    """Every item of ``action``'s list field ``items``, fetched ``PAGE`` at a time; ``total`` names the answer's
    count of all items."""
    offset = 0
    while True:
        result = sdk.call(service, action, {**params, "Offset": offset, "Limit": PAGE})
        page = result.get(items) or []
        yield from page
        offset += len(page)
        if len(page) < PAGE or offset >= int(result.get(total) or 0):
            return
